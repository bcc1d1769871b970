// Native journal logging (sd_journal_sendv; the variadic sd_journal_send cannot be called from Swift).
import CSystemd
import SystemCalls

public enum Journal {
    /// True when stderr is connected to journald: JOURNAL_STREAM names stderr's device and inode.
    public static func stderrIsJournal() -> Bool {
        guard let env = environment("JOURNAL_STREAM") else { return false }
        let parts = env.split(separator: ":")
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]),
              let stderr = deviceAndInode(ofUnowned: 2) else { return false }
        return stderr.device == dev && stderr.inode == ino
    }

    /// Sends one entry; fields are `NAME=value` (MESSAGE and PRIORITY among them). Returns false if journald refused.
    @discardableResult
    public static func send(_ fields: [String]) -> Bool {
        var storage = fields.map { Array($0.utf8) }
        return storage.withUnsafeMutableBufferPointer { buffers -> Bool in
            var iovecs = [iovec]()
            iovecs.reserveCapacity(buffers.count)
            for i in buffers.indices {
                buffers[i].withUnsafeMutableBytes { raw in
                    iovecs.append(iovec(iov_base: raw.baseAddress, iov_len: raw.count))
                }
            }
            // The pointers stay valid: `storage` is neither resized nor moved while iovecs is in use.
            return sd_journal_sendv(&iovecs, Int32(iovecs.count)) >= 0
        }
    }
}
