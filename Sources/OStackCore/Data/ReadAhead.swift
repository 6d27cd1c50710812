import Dispatch
import Synchronization

/// Byte strings produced on a thread of their own and handed to the caller in chunks, at most
/// `depth` chunks waiting, so a producer (stepping and decrypting database pages) and the caller
/// (scanning and writing what it reads) each keep one core busy while memory stays bounded.
///
/// The caller owns the order of things: `start` the producer, take chunks with `next()` until it
/// returns nil (or throws the producer's error), give each back with `recycle`, and `finish()`
/// before it touches anything the producer uses again: `finish` stops the producer if it is still
/// going and waits for its thread to end.
final class ReadAhead: Sendable {
    /// Items one after another in `bytes`, each ending at the next of `ends`.
    struct Chunk: Sendable {
        var bytes: [UInt8] = []
        var ends: [Int] = []

        mutating func append(_ item: UnsafeRawBufferPointer) {
            bytes.append(contentsOf: item)
            ends.append(bytes.count)
        }

        /// Each item in order, as bytes valid during `body` only.
        func forEach<E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> Void) throws(E) {
            var failure: E?
            bytes.withUnsafeBytes { buffer in
                var start = 0
                for end in ends {
                    do throws(E) {
                        try body(UnsafeRawBufferPointer(rebasing: buffer[start..<end]))
                    } catch {
                        failure = error
                        return
                    }
                    start = end
                }
            }
            if let failure { throw failure }
        }
    }

    private struct State {
        var full: [Chunk] = []
        var spare: [Chunk] = []
        var outcome: Result<Void, OStackError>?
        var cancelled = false
    }
    private let state = Mutex(State())
    private let ready = DispatchSemaphore(value: 0)
    private let room: DispatchSemaphore
    private let ended = DispatchSemaphore(value: 0)
    private let chunkBytes: Int

    init(depth: Int = 2, chunkBytes: Int = 256 * 1024) {
        room = .slots(depth)
        self.chunkBytes = chunkBytes
    }

    /// Runs `produce` on another thread; it calls the function it is given once per item, which
    /// returns false when the caller has stopped (then `produce` should return).
    func start(
        _ produce: @escaping @Sendable (_ emit: (UnsafeRawBufferPointer) -> Bool) throws(OStackError) -> Void
    ) {
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            var chunk = Chunk()
            chunk.bytes.reserveCapacity(chunkBytes + chunkBytes / 4)
            let outcome = Result { () throws(OStackError) in
                try produce { item in
                    chunk.append(item)
                    guard chunk.bytes.count >= chunkBytes else { return true }
                    guard hand(chunk) else { return false }
                    chunk = state.withLock { $0.spare.popLast() } ?? Chunk()
                    chunk.bytes.removeAll(keepingCapacity: true)
                    chunk.ends.removeAll(keepingCapacity: true)
                    return true
                }
            }
            // What came before an error is handed over too; nothing after a stop (`finish` gave the
            // room for one wait only).
            if !chunk.ends.isEmpty, !state.withLock({ $0.cancelled }) { _ = hand(chunk) }
            state.withLock { $0.outcome = outcome }
            ready.signal()
            ended.signal()
        }
    }

    /// Queues a full chunk once there is room; false when the caller has stopped.
    private func hand(_ chunk: Chunk) -> Bool {
        // After a stop no wait at all: `finish` gives the room for one wait only.
        if state.withLock({ $0.cancelled }) { return false }
        room.wait()
        let handed = state.withLock { (state) -> Bool in
            guard !state.cancelled else { return false }
            state.full.append(chunk)
            return true
        }
        if handed { ready.signal() }
        return handed
    }

    /// The next chunk, waiting for it; nil after the last one.
    func next() throws(OStackError) -> Chunk? {
        while true {
            ready.wait()
            let (chunk, outcome): (Chunk?, Result<Void, OStackError>?) = state.withLock {
                $0.full.isEmpty ? (nil, $0.outcome) : ($0.full.removeFirst(), nil)
            }
            if let chunk { return chunk }
            if let outcome {
                ready.signal()  // a later call ends the same way
                try outcome.get()
                return nil
            }
        }
    }

    /// Gives a chunk's room (and its storage) back to the producer.
    func recycle(_ chunk: Chunk) {
        state.withLock { if $0.spare.isEmpty { $0.spare.append(chunk) } }
        room.signal()
    }

    /// Stops the producer if it is still going and waits for its thread to end. Call it exactly
    /// once per `start`.
    func finish() {
        state.withLock { $0.cancelled = true }
        room.signal()
        ended.wait()
    }
}
