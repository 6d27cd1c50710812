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
    private let object: String?
    private let waiting: ((String) -> Bool)?

    /// `object` and `waiting` (whether an id belongs to a row not queued yet): a server that assigns
    /// its own ids must not have one of those ids adopted for another row (the row would then clash
    /// with it when its turn comes); such an answer stays unconfirmed, as when the id is taken here.
    public init(rows: Int, object: String? = nil, waiting: ((String) -> Bool)? = nil, step: @escaping Step) {
        remaining = rows
        self.object = object
        self.waiting = waiting
        self.step = step
    }

    /// Called between requests (nothing in flight) once the feed has queued more, at the first
    /// chance and then at most every `pauseInterval` seconds: an import anchors its audit trail and
    /// writes its state summary there, so a push cut off part-way leaves little unanchored.
    public var pause: (() -> Void)?
    var pauseInterval: Duration = .seconds(2)
    private var paused: (at: ContinuousClock.Instant, queued: Int)?

    /// The pusher's call between requests.
    func between() {
        guard let pause, queued > (paused?.queued ?? 0) else { return }
        let now = ContinuousClock.now
        if let paused, now - paused.at < pauseInterval { return }
        paused = (now, queued)
        pause()
    }

    /// Whether a server may not give `id` to another record of `object`: a record here has it, or
    /// (with a feed) a row still to be queued does. Used by the settler and the create verifier.
    static func isTaken(_ object: String, _ id: String, store: LocalStore, feed: PushFeed?) throws(OStackError)
        -> Bool
    {
        try store.hasRecord(object, id) || feed?.reserves(object, id) == true
    }

    /// Whether `id` of `object` is one of the rows still to be queued.
    func reserves(_ object: String, _ id: String) -> Bool {
        remaining > 0 && object == self.object && waiting?(id) == true
    }

    var hasMore: Bool { remaining > 0 && failure == nil }

    /// Queues the next chunk of up to `limit` rows; a failure is kept, not thrown (the push goes on
    /// with what is queued, and the command reports it after).
    public func feed(_ limit: Int? = nil) {
        guard hasMore else { return }
        do {
            let asked = Swift.min(remaining, limit ?? chunk)
            let taken = try step(asked)
            guard taken > 0, taken <= asked else {
                failure = OStackError(.storageFailure, detail: "push feed: a step queued \(taken) of \(asked)")
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
