import Glibc
import Synchronization
import Testing

@testable import OStackCore

/// `ReadAhead` (the export's reader thread): every item once and in order, whatever the chunk size
/// and depth; a caller that stops early or a producer that fails ends cleanly, never hangs.
@Suite(.timeLimit(.minutes(1))) struct ReadAheadTests {
    private static func items(_ count: Int) -> [[UInt8]] {
        (0..<count).map { Array("item-\($0)-".utf8) + Array(repeating: UInt8(ascii: "x"), count: $0 % 37) }
    }

    /// Everything the caller gets from a producer of `items`, stopping after `stopAfter` when given.
    private static func drain(
        _ items: [[UInt8]], depth: Int, chunkBytes: Int, failAfter: Int? = nil, stopAfter: Int? = nil
    ) -> (got: [[UInt8]], error: OStackError?, produced: Int) {
        let ahead = ReadAhead(depth: depth, chunkBytes: chunkBytes)
        let produced = Mutex(0)
        ahead.start { (emit) throws(OStackError) in
            for (index, item) in items.enumerated() {
                if index == failAfter { throw OStackError(.storageFailure, detail: "test failure") }
                produced.withLock { $0 += 1 }
                let going = item.withUnsafeBytes { emit($0) }
                if !going { return }
            }
        }
        var got: [[UInt8]] = []
        var failure: OStackError?
        do {
            outer: while let chunk = try ahead.next() {
                var stop = false
                chunk.forEach { (bytes) in
                    if stop { return }
                    got.append(Array(bytes))
                    if got.count == stopAfter { stop = true }
                }
                ahead.recycle(chunk)
                if stop { break outer }
            }
        } catch {
            failure = error
        }
        ahead.finish()
        return (got, failure, produced.withLock { $0 })
    }

    @Test(arguments: [(1, 1), (1, 64), (2, 7), (3, 4096), (2, 1 << 20)])
    func everyItemOnceInOrder(depth: Int, chunkBytes: Int) {
        let items = Self.items(5_000)
        let result = Self.drain(items, depth: depth, chunkBytes: chunkBytes)
        #expect(result.error == nil)
        #expect(result.got == items)
    }

    @Test func anEmptyProducerEndsAtOnce() {
        let result = Self.drain([], depth: 2, chunkBytes: 16)
        #expect(result.got.isEmpty && result.error == nil)
    }

    /// A caller that stops early stops the producer too (it does not read everything ahead).
    @Test func aCallerThatStopsStopsTheProducer() {
        let items = Self.items(100_000)
        let result = Self.drain(items, depth: 2, chunkBytes: 256, stopAfter: 10)
        #expect(result.got == Array(items.prefix(10)))
        #expect(result.produced < 1_000)
    }

    /// The producer's error reaches the caller after every item before it.
    @Test func theProducersErrorComesAfterItsItems() {
        let items = Self.items(3_000)
        let result = Self.drain(items, depth: 2, chunkBytes: 100, failAfter: 2_500)
        #expect(result.error?.code == .storageFailure)
        #expect(result.got == Array(items.prefix(2_500)))
    }
}

/// The pull's `PageStream`: a pull that stops after its first page (an error while writing) leaves
/// the fetcher waiting for room; it is woken, ends, and the stream is freed without a trap.
@Suite(.timeLimit(.minutes(1))) struct PageStreamStopTests {
    @Test func aStreamStoppedEarlyEndsAndIsFreed() async throws {
        let fetched = Mutex(0)
        weak var freed: PageStream?
        do {
            let stream = PageStream(depth: 3)
            freed = stream
            stream.start(after: nil, pageSize: 2) { (_, _) throws(OStackError) -> Puller.RawPage in
                let index = fetched.withLock { count -> Int in
                    count += 1
                    return count
                }
                let body = Array(#"{"records":[{"id":"a\#(index)"},{"id":"b\#(index)"}]}"#.utf8)
                return Puller.RawPage(body: body, ranges: [0..<1, 1..<2], total: nil, last: ("v\(index)", "b\(index)"))
            }
            _ = try stream.next()
            stream.cancel()
        }
        // The fetcher holds the stream until its thread ends.
        for _ in 0..<2000 where freed != nil { try await Task.sleep(for: .milliseconds(10)) }  // 20 s
        #expect(freed == nil)
        #expect(fetched.withLock { $0 } <= 5)
    }

    /// Issue 14: room is counted in bytes too. Pages of 8 MiB (a server sending huge records) take
    /// four 2 MiB units each, so a stream of depth 12 fetches three ahead of a writer that takes
    /// none, not twelve; each page taken gives its four units back.
    @Test func largePagesAreFetchedAheadByTheirSize() throws {
        let fetched = Mutex(0)
        let stream = PageStream(depth: 12, roomBytes: 2 << 20)
        stream.start(after: nil, pageSize: 2) { (_, _) throws(OStackError) -> Puller.RawPage in
            let index = fetched.withLock { count -> Int in
                count += 1
                return count
            }
            let page = Array(#"{"records":[{"id":"a\#(index)"},{"id":"b\#(index)"}]}"#.utf8)
            let body = page + [UInt8](repeating: 0x20, count: (8 << 20) - page.count)  // 8 MiB in all
            return Puller.RawPage(body: body, ranges: [0..<1, 1..<2], total: nil, last: ("v\(index)", "b\(index)"))
        }
        usleep(300_000)
        #expect(fetched.withLock { $0 } <= 3)  // twelve without the byte count
        _ = try stream.next()
        usleep(300_000)
        #expect(fetched.withLock { $0 } <= 4)
        stream.cancel()
    }

    /// `cancel` returns only once the fetcher has finished the request it was making: nothing of a
    /// pull (a request, a token refresh) goes on after it.
    @Test func cancelWaitsForTheRequestUnderWay() throws {
        let inFetch = Mutex(false)
        let stream = PageStream(depth: 3)
        stream.start(after: nil, pageSize: 2) { (_, first) throws(OStackError) -> Puller.RawPage in
            inFetch.withLock { $0 = true }
            if !first { usleep(300_000) }  // a slow second page
            defer { inFetch.withLock { $0 = false } }
            let body = Array(#"{"records":[{"id":"a"},{"id":"b"}]}"#.utf8)
            return Puller.RawPage(body: body, ranges: [0..<1, 1..<2], total: nil, last: ("v\(first)", "b\(first)"))
        }
        _ = try stream.next()
        // Until the fetcher is inside the second request (however busy the machine).
        var waited = 0
        while !inFetch.withLock({ $0 }) && waited < 10_000 {
            usleep(1_000)
            waited += 1
        }
        #expect(inFetch.withLock { $0 })
        stream.cancel()
        #expect(!inFetch.withLock { $0 })
    }
}
