/* Bench floor: the least a program can do to advertise an iBeacon over H4 — connect, send Reset and the three
 * legacy advertising commands, wait for each Command Complete, then sit still. No config, no probing, no checks
 * beyond the status byte.
 *     raw_h4_client HOST PORT HEXDATA
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fd;

static int command(unsigned short opcode, const unsigned char *params, unsigned char len) {
    unsigned char buf[260] = {0x01, (unsigned char)(opcode & 0xff), (unsigned char)(opcode >> 8), len};
    memcpy(buf + 4, params, len);
    if (write(fd, buf, 4 + len) != 4 + len) return -1;
    for (;;) { /* read events until the Command Complete for this opcode */
        unsigned char h[3], p[256];
        if (read(fd, h, 3) != 3 || h[0] != 0x04) return -1;
        size_t got = 0;
        while (got < h[2]) { ssize_t n = read(fd, p + got, h[2] - got); if (n <= 0) return -1; got += (size_t)n; }
        if (h[1] == 0x0e && h[2] >= 4 && (p[1] | p[2] << 8) == opcode) return p[3];
    }
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s HOST PORT HEXDATA\n", argv[0]); return 64; }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 69; }
    unsigned char data[32] = {0};
    size_t n = strlen(argv[3]) / 2;
    if (n > 31) return 64;
    data[0] = (unsigned char)n;
    for (size_t i = 0; i < n; i++) sscanf(argv[3] + 2 * i, "%2hhx", &data[1 + i]);
    const unsigned char params[15] = {0xa0, 0x00, 0xa0, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0x07, 0};
    const unsigned char enable = 1;
    if (command(0x0c03, NULL, 0) != 0 || command(0x2006, params, 15) != 0 || command(0x2008, data, 32) != 0 ||
        command(0x200a, &enable, 1) != 0) { fprintf(stderr, "a command failed\n"); return 1; }
    pause();
    return 0;
}
