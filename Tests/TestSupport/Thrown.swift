// What a throwing call threw, for tests that look inside the error. Swift Testing's `#expect(throws:)` returns the
// error only from Swift 6.1 on; beacond's tests also build with Debian's Swift 6.0.

/// The error of type `E` that `body` threw, or nil when it threw nothing or something else.
public func thrown<E: Error>(_ type: E.Type, _ body: () throws -> Void) -> E? {
    do {
        try body()
        return nil
    } catch let e as E {
        return e
    } catch {
        return nil
    }
}
