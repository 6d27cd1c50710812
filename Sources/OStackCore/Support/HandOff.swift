import Dispatch
import Synchronization

/// A bounded hand-off from one producer thread to one consumer (the pull's `PageStream`, the
/// export's `ReadAhead`): at most `depth` items waiting or being made, the producer's end (or its
/// error) delivered after every item queued before it, and a stop from the consumer that wakes a
/// producer waiting for room and waits for its thread to end.
///
/// The producer calls `reserve()` before it makes an item (false: the consumer has stopped, make
/// nothing more), `put` the item, and `close` once; the consumer takes items with `next()` until it
/// returns nil and gives each one's room back with `release()`. `stop()` once, from the consumer,
/// when it is done (early or not): after it, the producer's thread has ended and nothing of it runs.
final class HandOff<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var end: Result<Void, OStackError>?
        var stopped = false
        var running = false
    }
    private let state = Mutex(State())
    private let ready = DispatchSemaphore(value: 0)
    private let room: DispatchSemaphore
    private let ended = DispatchSemaphore(value: 0)

    init(depth: Int) {
        // Made at 0 and signalled up: libdispatch traps when a semaphore is freed below the value it
        // was made with, which a producer stopped early leaves.
        room = DispatchSemaphore(value: 0)
        for _ in 0..<max(1, depth) { room.signal() }
    }

    /// Runs `produce` on a thread of its own (`stop` waits for it to return).
    func run(_ produce: @escaping @Sendable () -> Void) {
        state.withLock { $0.running = true }
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            defer { ended.signal() }
            produce()
        }
    }

    // MARK: Producer

    /// Waits for room for one item; false once the consumer has stopped (no wait at all then:
    /// `stop` makes room for one wait only).
    func reserve() -> Bool {
        if state.withLock({ $0.stopped }) { return false }
        room.wait()
        return !state.withLock { $0.stopped }
    }

    /// Queues an item room was reserved for (dropped after a stop).
    func put(_ item: Item) {
        let queued = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.items.append(item)
            return true
        }
        if queued { ready.signal() }
    }

    /// Ends the items: `next()` returns nil (or throws the error) after every item queued before.
    func close(_ outcome: Result<Void, OStackError> = .success(())) {
        state.withLock { $0.end = outcome }
        ready.signal()
    }

    // MARK: Consumer

    /// The next item, waiting for it; nil after the last one, or the producer's error.
    func next() throws(OStackError) -> Item? {
        while true {
            ready.wait()
            let (item, end): (Item?, Result<Void, OStackError>?) = state.withLock {
                $0.items.isEmpty ? (nil, $0.end) : ($0.items.removeFirst(), nil)
            }
            if let item { return item }
            if let end {
                ready.signal()  // a later call ends the same way
                try end.get()
                return nil
            }
        }
    }

    /// Gives the room of one item taken back to the producer.
    func release() {
        room.signal()
    }

    /// Stops the producer (one waiting for room is woken; `reserve` says false from now on) and
    /// waits for its thread to end. Call it once.
    func stop() {
        let running = state.withLock { state in
            state.stopped = true
            return state.running
        }
        room.signal()
        if running { ended.wait() }
    }
}
