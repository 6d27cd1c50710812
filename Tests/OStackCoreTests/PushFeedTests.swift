import Dispatch
import Glibc
import Synchronization
import Testing

@testable import OStackCore

/// `PushFeed` (an import queueing while its push sends): steps of the pusher's batch size, the rest
/// on `drain`, a failing step kept and stopping the feed, the request run on another thread while
/// one step is queued on this one.
@Suite(.timeLimit(.minutes(1))) struct PushFeedTests {
    /// A feed of `rows` that records each step's size and fails at step `failAt` when given.
    private static func feed(rows: Int, failAt: Int? = nil) -> (PushFeed, () -> [Int]) {
        let steps = Mutex<[Int]>([])
        let feed = PushFeed(rows: rows) { (limit) throws(OStackError) -> Int in
            let count = steps.withLock {
                $0.append(limit); return $0.count
            }
            if count == failAt { throw OStackError(.storageFailure, detail: "test: step fails") }
            return limit
        }
        return (feed, { steps.withLock { $0 } })
    }

    @Test func stepsAreTheBatchSizeAndDrainQueuesTheRest() throws {
        let (feed, steps) = Self.feed(rows: 12_000)
        feed.chunk = 200
        feed.feed()
        feed.feed()
        #expect(steps() == [200, 200] && feed.queued == 400 && feed.remaining == 11_600)
        try feed.drain()
        #expect(steps() == [200, 200, 5000, 5000, 1600])
        #expect(feed.queued == 12_000 && feed.remaining == 0 && !feed.hasMore)
        feed.feed()
        #expect(steps().count == 5, "nothing is asked of a finished feed")
    }

    @Test func aFailingStepStopsTheFeedAndDrainThrowsIt() {
        let (feed, steps) = Self.feed(rows: 1000, failAt: 2)
        feed.chunk = 300
        feed.feed()
        feed.feed()
        feed.feed()
        #expect(steps() == [300, 300] && feed.queued == 300 && !feed.hasMore)
        #expect(feed.failure?.code == .storageFailure)
        #expect(throws: OStackError.self) { try feed.drain() }
        #expect(steps().count == 2)
    }

    @Test func aStepThatQueuesNothingIsAFailureNotALoop() {
        let feed = PushFeed(rows: 10) { (_) throws(OStackError) -> Int in 0 }
        #expect(throws: OStackError.self) { try feed.drain() }
        #expect(feed.queued == 0 && feed.failure != nil)
    }

    @Test func theRequestRunsElsewhereWhileOneStepIsQueuedHere() throws {
        // The request waits for the step to begin: done one after the other, it would time out.
        let stepping = DispatchSemaphore(value: 0)
        let taken = Mutex<[Int]>([])
        let feed = PushFeed(rows: 500) { (limit) throws(OStackError) -> Int in
            taken.withLock { $0.append(limit) }
            stepping.signal()
            return limit
        }
        feed.chunk = 200
        let here = pthread_self()
        let there = Mutex<pthread_t?>(nil)
        let overlapped = try feed.overlapping { () throws(OStackError) -> Bool in
            there.withLock { $0 = pthread_self() }
            return stepping.wait(timeout: .now() + 10) == .success
        }
        func steps() -> [Int] { taken.withLock { $0 } }
        #expect(overlapped && steps() == [200])
        #expect(there.withLock { $0 }.map { pthread_equal($0, here) == 0 } == true)

        // A failed request is thrown after its step; a finished feed only runs the request.
        #expect(throws: OStackError.self) {
            try feed.overlapping { () throws(OStackError) -> Int in
                throw OStackError(.offline, detail: "test: no answer")
            }
        }
        #expect(steps() == [200, 200])
        try feed.drain()
        #expect(try feed.overlapping { () throws(OStackError) -> Int in 7 } == 7)
        #expect(steps() == [200, 200, 100])
    }

    /// The pause between requests (an import anchors its audit trail there): at the first chance
    /// after rows were queued, then at most once per interval, never when nothing new was queued.
    @Test func thePauseComesOnceRowsAreQueuedThenAtMostEveryInterval() {
        let (feed, _) = Self.feed(rows: 1000)
        let pauses = Mutex(0)
        feed.pause = { pauses.withLock { $0 += 1 } }
        feed.pauseInterval = .seconds(3600)
        feed.between()
        #expect(pauses.withLock { $0 } == 0, "nothing queued yet")
        feed.feed(100)
        feed.between()
        feed.feed(100)
        feed.between()
        #expect(pauses.withLock { $0 } == 1, "once, then not within the interval")
        feed.pauseInterval = .zero
        feed.between()
        #expect(pauses.withLock { $0 } == 2)
        feed.between()
        #expect(pauses.withLock { $0 } == 2, "nothing new queued")
    }

    /// Ids of rows not queued yet are taken (for the object fed), until their rows are queued.
    @Test func idsOfRowsNotQueuedYetAreTaken() throws {
        var next = 0
        let ids = ["a", "b", "c", "d"]
        let feed = PushFeed(
            rows: 4, object: "task", waiting: { id in ids.firstIndex(of: id).map { $0 >= next } ?? false }
        ) {
            (limit) throws(OStackError) -> Int in
            next += limit
            return limit
        }
        #expect(feed.reserves("task", "a") && feed.reserves("task", "d"))
        #expect(!feed.reserves("note", "a") && !feed.reserves("task", "x"))
        feed.feed(2)
        #expect(!feed.reserves("task", "a") && !feed.reserves("task", "b") && feed.reserves("task", "c"))
        try feed.drain()
        #expect(!feed.reserves("task", "d"))
    }
}
