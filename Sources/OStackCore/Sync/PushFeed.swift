import Dispatch
import Synchronization

/// Changes still to be queued while a push runs (`records import`, docs/sync.md "Push"): the pusher
/// queues the feed's next chunk on its own thread, in the feed's own committed transaction, while a
/// request is in flight, so the import's local writes overlap the server's work instead of preceding
/// it. Every chunk is queued before it can be sent, exactly as if the whole import had been queued
/// first; a push that stops early leaves the rest to `drain()`, so nothing is lost.
///
/// Used from one thread at a time (the command's, then the pusher's on that same thread).
public final class PushFeed {
    /// Queues up to the given number of the next rows (one transaction) and says how many it took.
    public typealias Step = (_ limit: Int) throws(OStackError) -> Int

    /// Rows not yet queued.
    public private(set) var remaining: Int
    /// Rows queued so far.
    public private(set) var queued = 0
    /// The error that stopped the feed (nothing more is queued after it).
    public private(set) var failure: OStackError?
    /// Rows queued per step: the pusher sets its batch size, so that while one batch is in flight
    /// the next is queued (measured: a larger step leaves a remainder sent as a small extra request,
    /// and keeps a longer queue to claim and settle in).
    var chunk = 200
    private let step: Step

    public init(rows: Int, step: @escaping Step) {
        remaining = rows
        self.step = step
    }

    var hasMore: Bool { remaining > 0 && failure == nil }

    /// Queues the next chunk of up to `limit` rows; a failure is kept, not thrown (the push goes on
    /// with what is queued, and the command reports it after).
    public func feed(_ limit: Int? = nil) {
        guard hasMore else { return }
        do {
            let taken = try step(Swift.min(remaining, limit ?? chunk))
            guard taken > 0 else {
                failure = OStackError(.storageFailure, detail: "push feed: a step queued nothing")
                return
            }
            queued += taken
            remaining -= taken
        } catch {
            failure = error
        }
    }

    /// Queues everything not queued yet, then throws the error that stopped the feed, if any.
    public func drain() throws(OStackError) {
        while hasMore { feed(5000) }
        if let failure { throw failure }
    }

    /// `work` (a request) on another thread while the next chunk is queued on this one. The request
    /// reaches no database: the pusher resolves the server's routes (which may read the store)
    /// before its first request, as the pull does for its page fetcher.
    func overlapping<T: Sendable>(_ work: @escaping @Sendable () throws(OStackError) -> T) throws(OStackError) -> T {
        guard hasMore else { return try work() }
        let result = Mutex<Result<T, OStackError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let outcome = Result { () throws(OStackError) -> T in try work() }
            result.withLock { $0 = outcome }
            done.signal()
        }
        feed()
        FailPoint.hit("push-feed.request-in-flight")
        done.wait()
        return try result.withLock { $0! }.get()
    }
}
