/// Reconciliation (docs/sync.md, "Pull"): every id and version the server holds, compared with the
/// mirror. Local records without queued changes that the server no longer has are deleted locally;
/// records the server holds in another version than the mirror, or that the mirror lacks (a write
/// committed later than the pull's look-back reaches), are named for the pull to fetch again. Pages
/// by id with `select=id,updated_at` until a page comes back empty: a server may cap a page below
/// what was asked, and one that then leaves out (or gets wrong) `hasMore` must not have every record
/// after the cap deleted here. One request more than the pages; then one pass over the mirror.
struct Reconciler {
    let store: LocalStore
    let api: DataAPI
    var pageSize = 10_000

    struct Outcome {
        /// Records deleted here.
        var deleted = 0
        /// Records to fetch again; none of them has a queued change, nor was refused before in the
        /// version listed.
        var stale: [String] = []
    }

    /// `refused`: records refused before, by id and version (`Puller.refusedRecords`): not named
    /// again while the server lists the same version (each refusal is reported once).
    func reconcile(_ object: String, refused: [String: String] = [:]) throws(OStackError) -> Outcome {
        // Each listed id with a hash of its version (`versionHash`): the server's whole list is held
        // until the mirror has been read, and a version takes no more room than its hash.
        // Keyed by the id's bytes (`ExactID`): as strings, two ids that differ only in Unicode
        // normalisation were one key, and the second of their two mirror records was deleted.
        var remote: [ExactID: Int] = [:]
        var after: String?
        // The server cannot hold many more records than the mirror just pulled from it.
        let bound = 2 * (try store.recordCount(object)) + 100_000
        let scanner = FieldScanner(fields: ["id", "updated_at"])
        while true {
            var query: [(String, String)] = [
                ("select", "id,updated_at"), ("sort", "id"), ("top", String(pageSize)), ("count", "false"),
            ]
            if let after {
                let filter: JSONValue = ["id", ">", .string(Self.keysetBound(after))]
                query.append(("filter", String(decoding: filter.serialized(), as: UTF8.self)))
            }
            let outcome = try api.exchange(.list(object: object), query: query)
            guard outcome.ok else {
                throw outcome.error.asOStackError(account: api.account.alias, host: api.account.server.authority)
            }
            // Every record listed must have a string id: one without could hide the end of the list.
            let known = remote.count
            let listed: (count: Int, last: String?)? = outcome.response.body.withUnsafeBytes { raw in
                guard let found = FieldScanner.recordRanges(in: raw) else { return nil }
                var last: String?
                for range in found.ranges {
                    let values = scanner.scan(UnsafeRawBufferPointer(rebasing: raw[range]))
                    guard case .string(let id) = values[0] else { return nil }
                    let version: String? = if case .string(let text) = values[1] { text } else { nil }
                    remote[ExactID(id)] = Self.versionHash(version)
                    last = id
                }
                return (found.ranges.count, last)
            }
            guard let listed else { throw malformed("id page malformed") }
            if listed.count == 0 { break }
            // Loop guards: every page must bring ids not seen yet and move the keyset on, and the
            // whole walk stays within a bound set by the mirror's size.
            guard remote.count > known, let next = listed.last, after.map({ !next.utf8.elementsEqual($0.utf8) }) ?? true
            else {
                throw malformed("id page repeated: the cursor did not advance")
            }
            if remote.count > bound { throw malformed("id pages do not end") }
            after = next
        }
        // One pass over the mirror's current records: each is deleted (the server no longer has it),
        // fetched again (another version) or left; what the server listed and the mirror lacks is
        // fetched too. Records with a queued change are left to the push.
        let queued = try store.queuedRecordIDs(object)
        var result = Outcome()
        var gone: [String] = []
        var stale: [(id: String, listed: Int)] = []
        try store.forEachCurrentVersion(object) { idBytes, versionBytes in
            let id = String(decoding: idBytes, as: UTF8.self)
            guard let listed = remote.removeValue(forKey: ExactID(id)) else {
                if !queued.contains(id) { gone.append(id) }
                return
            }
            let held = Self.versionHash(versionBytes.map { String(decoding: $0, as: UTF8.self) })
            // A server that lists no version cannot say the mirror's is old.
            if listed != Self.noVersion && held != listed && !queued.contains(id) { stale.append((id, listed)) }
        }
        for (key, listed) in remote where !queued.contains(key.text) && PushClassifier.isUsableID(key.text) {
            stale.append((key.text, listed))
        }
        result.stale = stale.compactMap { id, listed in
            // Refused before in this version ("" for a version unknown then).
            let before = refused[id].map { Self.versionHash($0.isEmpty ? nil : $0) }
            return before == listed ? nil : id
        }
        // A change queued since the mirror was read (another process) keeps its record.
        result.deleted = try store.transaction { () throws(OStackError) -> Int in
            let queuedNow = try store.queuedRecordIDs(object)
            var deleted = 0
            for id in gone where !queuedNow.contains(id) {
                try store.deleteRecord(object, id)
                deleted += 1
            }
            return deleted
        }
        return result
    }

    /// The id the next page starts after: `id` itself, or, when `id > …` would make the address
    /// longer than a server takes (a long id of combining marks), its longest prefix of at most 300
    /// UTF-8 bytes. A prefix sorts before the id, so the page starts at or before where it should:
    /// ids seen again are counted once, and the loop guards still hold. (With the id itself every
    /// reconciling sync of the object failed, `request-too-long`.)
    static func keysetBound(_ id: String) -> String {
        guard CreateVerifier.addressCost(.string(id)) > CreateVerifier.filterBudget else { return id }
        var prefix = String.UnicodeScalarView()
        var bytes = 0
        for scalar in id.unicodeScalars {
            bytes += String(scalar).utf8.count
            if bytes > 300 { break }
            prefix.append(scalar)
        }
        return String(prefix)
    }

    /// A version's hash for comparison within this process (`Hasher` is seeded per process), never
    /// `noVersion`.
    static func versionHash(_ version: String?) -> Int {
        guard let version else { return noVersion }
        let hash = version.hashValue
        return hash == noVersion ? noVersion &+ 1 : hash
    }

    static let noVersion = 0

    func malformed(_ detail: String) -> OStackError {
        OStackError(.unexpectedResponse, context: .init(host: api.account.server.authority), detail: detail)
    }
}
