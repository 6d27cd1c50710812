/// Id-only reconciliation (docs/sync.md, "Pull"): local records without queued changes that the
/// server no longer has are deleted locally. Pages by id with `select=id` until a page comes back
/// empty: a server may cap a page below what was asked, and one that then leaves out (or gets wrong)
/// `hasMore` must not have every record after the cap deleted here. One request more than the pages.
struct Reconciler {
    let store: LocalStore
    let api: DataAPI
    var pageSize = 10_000

    func reconcile(_ object: String) throws(OStackError) -> Int {
        var remote = Set<String>()
        var after: String?
        // The server cannot hold many more records than the mirror just pulled from it.
        let bound = 2 * (try store.recordCount(object)) + 100_000
        let scanner = FieldScanner(fields: ["id"])
        while true {
            var query: [(String, String)] = [
                ("select", "id"), ("sort", "id"), ("top", String(pageSize)), ("count", "false"),
            ]
            if let after {
                let filter: JSONValue = ["id", ">", .string(after)]
                query.append(("filter", String(decoding: filter.serialized(), as: UTF8.self)))
            }
            let outcome = try api.exchange(.list(object: object), query: query)
            guard outcome.ok else {
                throw outcome.error.asOStackError(account: api.account.alias, host: api.account.server.authority)
            }
            // Every record listed must have a string id: one without could hide the end of the list.
            let page: [String]? = outcome.response.body.withUnsafeBytes { raw in
                FieldScanner.recordRanges(in: raw).flatMap { found in
                    let ids = found.ranges.compactMap { range -> String? in
                        if case .string(let id) = scanner.scan(UnsafeRawBufferPointer(rebasing: raw[range]))[0] {
                            return id
                        }
                        return nil
                    }
                    return ids.count == found.ranges.count ? ids : nil
                }
            }
            guard let page else { throw malformed("id page malformed") }
            let known = remote.count
            remote.formUnion(page)
            if page.isEmpty { break }
            // Loop guards: every page must bring ids not seen yet and move the keyset on, and the
            // whole walk stays within a bound set by the mirror's size.
            guard remote.count > known, let next = page.last, next != after else {
                throw malformed("id page repeated: the cursor did not advance")
            }
            if remote.count > bound { throw malformed("id pages do not end") }
            after = next
        }
        let gone = try store.settledIDs(object).subtracting(remote)
        try store.transaction { () throws(OStackError) in
            for id in gone { try store.deleteRecord(object, id) }
        }
        return gone.count
    }

    func malformed(_ detail: String) -> OStackError {
        OStackError(.unexpectedResponse, context: .init(host: api.account.server.authority), detail: detail)
    }
}
