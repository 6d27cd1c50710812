import SQLCipherKit

/// Pushes an account's queue (docs/sync.md, "Push"): stale claims recovered; possibly-delivered
/// creates verified first; then the oldest due entry of each record, grouped by object and operation
/// and sent in chunks up to the server's cap. Each chunk is claimed (and marked possibly delivered)
/// in a committed transaction before its request goes out, and its answer is classified
/// (`PushClassifier`) and settled (`PushSettler`) in one transaction.
struct Pusher {
    let store: LocalStore
    let api: DataAPI
    let batchCap: Int
    /// Whether updates and deletes may be batched (the server honours per-row versions); otherwise
    /// each goes alone with `If-Match`, so no conditional write is ever sent unconditionally.
    let conditionalBatches: Bool
    var progress: (@Sendable (SyncProgress) -> Void)?
    /// Changes still to be queued (an import): fed while requests are in flight.
    var feed: PushFeed?

    func push() throws(OStackError) -> PushReport {
        var report = PushReport()
        // What the push delivered, for the pull that brings it back (`noteEcho`). Failing to save
        // it costs only that pull's count (it would count those records as pulled), so it does not
        // fail the push.
        defer { try? store.saveEchoes() }
        // Routes resolved here: with a feed, requests go out on another thread, and resolving them
        // may read the store (as the pull's fetcher does, `Puller.pull`).
        _ = api.directory.discovery
        try store.recoverStaleClaims()
        let total = progress == nil ? 0 : try store.counts().pending + (feed?.remaining ?? 0)
        func advanced() {
            guard let progress, total > 0 else { return }
            let settled = report.pushed + report.failed + report.conflicts + report.unconfirmed
            progress(.pushing(done: Swift.min(settled, total), total: total))
        }
        // Bounded rounds (a change that is due again at once cannot loop the push); a round in
        // which the feed queued more is not counted: the feed itself is finite.
        var rounds = 0
        var fed = feed?.queued ?? 0
        while rounds < 1_000 {
            rounds += 1
            if let feed, feed.queued != fed {
                fed = feed.queued
                rounds -= 1  // the round before fed
                feed.between()
            }
            let cap = Swift.min(batchCap, try store.value("sync.batch-cap").flatMap { Int($0) } ?? batchCap)
            // A feed queues one batch per request: the queue stays about two batches long.
            feed?.chunk = Swift.max(1, cap)
            let read = try store.dueRows()
            let due = read.map(\.entry)
            if due.isEmpty {
                // Nothing else to send: queue the feed's next batch.
                guard let feed, feed.hasMore else { break }
                feed.feed()
                continue
            }
            do throws(OStackError) {
                // Possibly-delivered creates first: find out whether they arrived.
                let unsure = due.filter { $0.sent && $0.operation == .create }
                if !unsure.isEmpty {
                    try CreateVerifier(store: store, api: api, batchCap: cap, feed: feed).verify(unsure, &report)
                    continue
                }
                // The rows as read: a claim finds an entry unchanged by comparing them (no decoding).
                let asRead = Dictionary(read.map { ($0.entry.seq, $0.row) }, uniquingKeysWith: { first, _ in first })
                var groups: [String: [QueueEntry]] = [:]
                var order: [String] = []
                for entry in due {
                    let key = entry.object + "\u{0}" + entry.operation.rawValue
                    if groups[key] == nil { order.append(key) }
                    groups[key, default: []].append(entry)
                }
                for key in order {
                    let entries = groups[key]!
                    let batchable = entries[0].operation == .create || conditionalBatches
                    let single = try singleWritesOnly(entries[0].object)
                    let size = batchable && !single ? cap : 1
                    for chunk in entries.chunked(size) {
                        try send(Array(chunk), asRead: asRead, &report)
                        advanced()
                    }
                }
            } catch let stop where stop.stopsTheAccount {
                report.stoppedBy = stop.code
                report.stoppedError = stop
                return report
            }
        }
        return report
    }

    /// Sends one chunk of same-object, same-operation entries and records every outcome.
    /// `asRead`: the rows `selected` were decoded from, by `seq` (see `LocalStore.claim`).
    func send(_ selected: [QueueEntry], asRead: [Int64: Row] = [:], _ report: inout PushReport) throws(OStackError) {
        let chunk = try store.claim(selected, asRead: asRead)
        if chunk.isEmpty { return }  // changed meanwhile: picked up again next round
        let request = PushRequest(chunk)
        let outcome: DataAPI.Outcome
        do {
            let (api, endpoint, body, headers) = (api, request.endpoint, request.body, request.headers)
            let send = { @Sendable () throws(OStackError) -> DataAPI.Outcome in
                try api.exchange(endpoint, body: body, headers: headers)
            }
            if let feed { outcome = try feed.overlapping(send) } else { outcome = try send() }
        } catch {
            // No answer: the request may or may not have arrived. Back to pending, no attempt counted.
            // Only a request that certainly never reached the server counts as undelivered.
            // (Locked, signed out or refused with 401: nothing was processed either.)
            let delivered =
                !error.requestNotSent && ![.locked, .pinLockedOut, .notSignedIn, .sessionExpired].contains(error.code)
            for entry in chunk { try store.release(entry, delivered: delivered) }
            throw error
        }
        let verdict = PushClassifier.classify(
            status: outcome.response.status, body: outcome.json,
            retryAfter: ServerError.retryAfterSeconds(outcome.response), operation: chunk[0].operation,
            ids: chunk.map(\.recordID))
        switch verdict {
        case .stop(let code):
            // Nothing was processed and nothing will be until the user acts: every change stays pending.
            for entry in chunk { try store.release(entry, delivered: false) }
            throw OStackError(code, context: .init(account: api.account.alias), detail: "push stopped: \(code)")
        case .failed(.unexpected(405, let code)) where chunk.count > 1:
            // The object takes single writes only (its `bulk` API method is disabled): remember it for
            // this account and send each change alone.
            try store.setValue(Self.singleWritesKey(chunk[0].object), code ?? "405")
            try retry(chunk, split: chunk.count, &report)
        case .failed(let failure) where chunk.count > 1 && chunk[0].operation == .create && failure.isolatable:
            // `createMany` is all-or-abort and names no row: nothing was created. Halving finds the bad
            // rows in O(log n) requests, and every good row is pushed.
            try retry(chunk, split: 2, &report)
        case .lookUp where chunk.count > 1:
            try retry(chunk, split: 2, &report)
        case .lookUp:
            try CreateVerifier(store: store, api: api, batchCap: 1, feed: feed).settleDuplicate(chunk[0], &report)
        default:
            let settler = PushSettler(store: store, feed: feed)
            try store.transaction { () throws(OStackError) in try settler.settle(chunk, verdict, &report) }
        }
    }

    /// Sends a refused chunk again in `split` parts (each change alone when `split` is its size). The
    /// refused request created nothing, so the changes are released as undelivered and re-read.
    func retry(_ chunk: [QueueEntry], split: Int, _ report: inout PushReport) throws(OStackError) {
        for entry in chunk { try store.release(entry, delivered: false) }
        var fresh: [QueueEntry] = []
        for entry in chunk { if let current = try store.entry(entry.id) { fresh.append(current) } }
        let size = Swift.max(1, (fresh.count + split - 1) / split)
        for part in fresh.chunked(size) { try send(Array(part), &report) }
    }

    static func singleWritesKey(_ object: String) -> String { "sync.single-writes." + object }

    /// Whether the server refused a batch of this object's writes (`405`): then each goes alone.
    func singleWritesOnly(_ object: String) throws(OStackError) -> Bool {
        try store.value(Self.singleWritesKey(object)) != nil
    }
}

extension PushFailure {
    /// A failure of a whole `createMany` that one of its rows may have caused alone.
    var isolatable: Bool {
        switch self {
        case .validation, .duplicate, .idTaken: true
        case .unexpected(let status, _): (400..<500).contains(status) && status != 405
        default: false
        }
    }
}
