import Dispatch

extension DispatchSemaphore {
    /// A semaphore holding `count` free slots (at least one) for a bounded hand-off. Made at 0 and
    /// signalled up: libdispatch traps when a semaphore is freed below the value it was made with,
    /// which a producer stopped early leaves (`PageStream`, `ReadAhead`).
    static func slots(_ count: Int) -> DispatchSemaphore {
        let semaphore = DispatchSemaphore(value: 0)
        for _ in 0..<max(1, count) { semaphore.signal() }
        return semaphore
    }
}
