// libbluetooth's headers are not self-contained: hci_lib.h needs the socket and base headers first.
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

#include <errno.h>

// ioctl request macros (_IOW/_IOR) do not import into Swift; these wrappers keep them in C.

/// Brings hciN up (HCIDEVUP needs CAP_NET_ADMIN). Returns 0 or -errno; -EALREADY when already up.
static inline int beacond_hci_dev_up(int ctl_fd, int dev_id) {
    return ioctl(ctl_fd, HCIDEVUP, dev_id) < 0 ? -errno : 0;
}

/// Takes hciN down (HCIDEVDOWN needs CAP_NET_ADMIN): the kernel closes the device whether or not the controller
/// answers. Returns 0 or -errno.
static inline int beacond_hci_dev_down(int ctl_fd, int dev_id) {
    return ioctl(ctl_fd, HCIDEVDOWN, dev_id) < 0 ? -errno : 0;
}

/// Fills `info` for hciN. Returns 0 or -errno (-ENODEV when there is no such device).
static inline int beacond_hci_dev_info(int ctl_fd, int dev_id, struct hci_dev_info *info) {
    info->dev_id = (uint16_t)dev_id;
    return ioctl(ctl_fd, HCIGETDEVINFO, (void *)info) < 0 ? -errno : 0;
}

/// True when the HCI_UP flag is set.
static inline int beacond_hci_dev_is_up(const struct hci_dev_info *info) {
    return (info->flags & (1u << HCI_UP)) != 0;
}

/// Sets the raw socket's filter: every event type we read (all events pass; the code picks what it needs).
static inline int beacond_hci_set_event_filter(int fd, int commands_only) {
    struct hci_filter f;
    hci_filter_clear(&f);
    // Commands other sockets (the kernel, bluetoothd, hcitool) send to the device: how beacond notices that
    // someone reset the controller or changed advertising under it.
    hci_filter_set_ptype(HCI_COMMAND_PKT, &f);
    if (!commands_only) {
        hci_filter_set_ptype(HCI_EVENT_PKT, &f);
        hci_filter_set_event(EVT_CMD_COMPLETE, &f);
        hci_filter_set_event(EVT_CMD_STATUS, &f);
        hci_filter_set_event(EVT_HARDWARE_ERROR, &f);
        hci_filter_set_event(EVT_LE_META_EVENT, &f);
        // A central that disconnects lets connectable advertising go on the air again.
        hci_filter_set_event(EVT_DISCONN_COMPLETE, &f);
    }
    return setsockopt(fd, SOL_HCI, HCI_FILTER, &f, sizeof f) < 0 ? -errno : 0;
}

/// Binds a raw HCI socket to hciN on the given channel.
static inline int beacond_hci_bind(int fd, int dev_id, int channel) {
    struct sockaddr_hci a = {0};
    a.hci_family = AF_BLUETOOTH;
    a.hci_dev = (uint16_t)dev_id;
    a.hci_channel = (uint16_t)channel;
    return bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ? -errno : 0;
}

/// Makes `fd` (a raw HCI socket) a watcher of device events: bound to no device, it receives the kernel's
/// stack-internal events (device registered, unregistered, up, down) for every hciN.
static inline int beacond_hci_watch_devices(int fd) {
    int r = beacond_hci_bind(fd, HCI_DEV_NONE, HCI_CHANNEL_RAW);
    if (r < 0) return r;
    struct hci_filter f;
    hci_filter_clear(&f);
    hci_filter_set_ptype(HCI_EVENT_PKT, &f);
    hci_filter_set_event(EVT_STACK_INTERNAL, &f);
    return setsockopt(fd, SOL_HCI, HCI_FILTER, &f, sizeof f) < 0 ? -errno : 0;
}

/// Binds `fd` to the management interface (HCI_CHANNEL_CONTROL, no device).
static inline int beacond_mgmt_bind(int fd) {
    return beacond_hci_bind(fd, HCI_DEV_NONE, HCI_CHANNEL_CONTROL);
}
