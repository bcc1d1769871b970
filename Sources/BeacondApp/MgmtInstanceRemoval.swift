// Removing beacond's mgmt instances: at stop, and at start for what an earlier run left in the kernel (the kernel
// keeps instances through a power cycle and would put them back on the air while beacond is stopped). What each
// answer means is MgmtDecisions'; this carries the commands.
import BluetoothHCI
import Connections
import DaemonCore
import Mgmt
import SystemdSupport

enum MgmtInstanceRemoval {
    /// Removes what the kernel keeps of beacond's (its instances) when no backend is open, for example after the
    /// adapter was powered off: the kernel would put the instances back on the air at the next power-on while beacond
    /// is stopped.
    static func removeLeftovers(owned: OwnershipStore, index: UInt16, device: DeviceSpec, loop: EventLoop, log: Logger,
                                _ done: @escaping () -> Void) {
        let instances = owned[device.description, .mgmtInstances]
        guard !instances.isEmpty, let c = try? MgmtConnection(index: index, loop: loop) else { return done() }
        removeAll(instances.sorted(by: >), through: c, device: device, log: log) { gone in
            owned[device.description, .mgmtInstances].subtract(gone)
            c.close()
            done()
        }
    }

    /// Removes the instances one by one; `done` gets the ones the kernel no longer has.
    static func removeAll(_ instances: [UInt8], through c: MgmtConnection, device: DeviceSpec, log: Logger,
                                  gone: Set<UInt8> = [], _ done: @escaping (Set<UInt8>) -> Void) {
        guard let first = instances.first else { return done(gone) }
        remove(first, through: c, device: device, log: log) { removed in
            removeAll(Array(instances.dropFirst()), through: c, device: device, log: log,
                      gone: removed ? gone.union([first]) : gone, done)
        }
    }

    /// Removes the instance; on a powered-off adapter as MgmtDecisions.removal says.
    private static func remove(_ instance: UInt8, through c: MgmtConnection, device: DeviceSpec, log: Logger,
                               _ done: @escaping (_ gone: Bool) -> Void) {
        c.send(.removeAdvertising(instance: instance)) { result in
            switch MgmtDecisions.removal(instance, result, device: device.description) {
            case .gone(let message):
                if let message { log.info(message) }
                done(true)
            case .kept(let message):
                log.warning(message)
                done(false)
            case .whilePoweredOff(let steps):
                c.run(steps) { result in
                    let (gone, message) = MgmtDecisions.removalWhilePoweredOff(instance, result, device: device.description)
                    if gone { log.info(message) } else { log.warning(message) }
                    done(gone)
                }
            }
        }
    }
}
