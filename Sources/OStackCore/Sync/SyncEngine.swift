/// The one sync core (docs/sync.md), run per account against its `LocalStore` and `DataAPI`: a
/// façade over the units that each do one job — `Pusher` (with `PushRequest`, `PushClassifier`,
/// `PushSettler`, `CreateVerifier`), `ConflictResolver`, `Puller` and `Reconciler`. All queue SQL
/// is in `QueueStore.swift` and `QueueStore+Outcomes.swift`.
public struct SyncEngine: Sendable {
    public let store: LocalStore
    public let api: DataAPI
    public var batchCap = 200
    /// Whether the server honours per-row expected versions in `updateMany` / `deleteMany` (a
    /// discovery capability). Without it updates and deletes go one by one with `If-Match`.
    public var conditionalBatches = false
    public var pageSize = 2000
    /// Reconcile deletions when the last reconciliation is older than this.
    public var reconcileInterval: Double = 900
    /// How far before its cursor a pull starts (`sync.lookback`; docs/sync.md, "Look-back").
    public var lookbackMilliseconds: Int64 = Puller.defaultLookbackMilliseconds
    public var progress: (@Sendable (SyncProgress) -> Void)?

    public init(store: LocalStore, api: DataAPI) {
        self.store = store
        self.api = api
    }

    public func push(feed: PushFeed? = nil) throws(OStackError) -> PushReport {
        try Pusher(
            store: store, api: api, batchCap: batchCap, conditionalBatches: conditionalBatches, progress: progress,
            feed: feed
        ).push()
    }

    /// Pulls every change of a tracked object since its cursor, then reconciles deletions when due.
    public func pull(_ object: String, reconcile: Bool = false) throws(OStackError) -> PullReport {
        var puller = Puller(
            store: store, api: api, pageSize: pageSize, reconcileInterval: reconcileInterval, progress: progress)
        puller.lookbackMilliseconds = lookbackMilliseconds
        return try puller.pull(object, reconcile: reconcile)
    }

    /// `conflicts resolve ID --keep mine|theirs`.
    public func resolve(_ entry: QueueEntry, keepMine: Bool) throws(OStackError) {
        try ConflictResolver(store: store).resolve(entry, keepMine: keepMine)
    }
}

/// How far a sync has got, for a progress display (`sync` on a terminal).
public enum SyncProgress: Sendable, Equatable {
    /// `done` records of `object` pulled so far, of `total` (the server's count of what was still to
    /// pull when the pull started; nil when it gave none).
    case pulling(object: String, done: Int, total: Int?)
    /// `done` queued changes settled (delivered, failed or in conflict) of `total`.
    case pushing(done: Int, total: Int)
}
