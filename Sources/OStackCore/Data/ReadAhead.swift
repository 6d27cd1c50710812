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

    private let handOff: HandOff<Chunk>
    /// A chunk given back, whose storage the producer fills next.
    private let spare = Mutex<Chunk?>(nil)
    private let chunkBytes: Int

    init(depth: Int = 2, chunkBytes: Int = 256 * 1024) {
        handOff = HandOff(depth: depth)
        self.chunkBytes = chunkBytes
    }

    /// Runs `produce` on another thread; it calls the function it is given once per item, which
    /// returns false when the caller has stopped (then `produce` should return).
    func start(
        _ produce: @escaping @Sendable (_ emit: (UnsafeRawBufferPointer) -> Bool) throws(OStackError) -> Void
    ) {
        handOff.run { [self] in
            var chunk = Chunk()
            chunk.bytes.reserveCapacity(chunkBytes + chunkBytes / 4)
            let outcome = Result { () throws(OStackError) in
                try produce { item in
                    chunk.append(item)
                    guard chunk.bytes.count >= chunkBytes else { return true }
                    guard handOff.reserve() else { return false }
                    handOff.put(chunk)
                    chunk = spare.withLock { $0.take() } ?? Chunk()
                    chunk.bytes.removeAll(keepingCapacity: true)
                    chunk.ends.removeAll(keepingCapacity: true)
                    return true
                }
            }
            // What came before an error is handed over too; nothing after a stop.
            if !chunk.ends.isEmpty, handOff.reserve() { handOff.put(chunk) }
            handOff.close(outcome)
        }
    }

    /// The next chunk, waiting for it; nil after the last one.
    func next() throws(OStackError) -> Chunk? {
        try handOff.next()
    }

    /// Gives a chunk's room (and its storage) back to the producer.
    func recycle(_ chunk: Chunk) {
        spare.withLock { if $0 == nil { $0 = chunk } }
        handOff.release()
    }

    /// Stops the producer if it is still going and waits for its thread to end. Call it exactly
    /// once per `start`.
    func finish() {
        handOff.stop()
    }
}
