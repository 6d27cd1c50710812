import FoundationEssentials

/// Per-account metadata cache (docs/sync.md, "Metadata"): `GET {metadata}/object/<name>` with `If-None-Match` (304
/// refreshes the TTL), a 5-minute TTL, stale entries used when the server cannot be reached. Each
/// object's field set has a schema version; when it changes, the change is recorded and local
/// records are re-validated against the new schema.
public struct MetadataCache: Sendable {
    public let store: LocalStore
    public let api: DataAPI?
    public var ttl: Double = 300

    public init(store: LocalStore, api: DataAPI?) {
        self.store = store
        self.api = api
    }

    /// Labels come translated for the request's `Accept-Language`: when the locale changes, the
    /// cached metadata (in the previous language) is dropped.
    public func useLocale(_ locale: String?) throws(OStackError) {
        let current = locale ?? ""
        guard try store.value("meta.locale") != current else { return }
        try store.transaction { () throws(OStackError) in
            try store.run("DELETE FROM meta_objects")
            try store.run("DELETE FROM meta_documents WHERE kind IN ('objects', 'apps')")
            try store.setValue("meta.locale", current)
        }
    }

    public struct Cached: Sendable {
        public var schema: ObjectSchema
        public var schemaVersion: Int
        /// True when it came from the cache past its TTL because the server could not be reached.
        public var stale: Bool
    }

    /// The cached schema however old, without asking the server; nil when none is cached.
    public func cachedSchema(_ name: String) -> ObjectSchema? {
        guard ObjectSchema.isIdentifier(name),
            let row = try? store.rows("SELECT item FROM meta_objects WHERE name = ?", [.text(name)]).first,
            let text = row.text("item"), let item = JSONValue.parse(Array(text.utf8))
        else { return nil }
        return ObjectSchema(item: item)
    }

    /// The object's schema: cached when fresh, revalidated otherwise, stale when offline.
    public func object(_ name: String) throws(OStackError) -> Cached {
        guard ObjectSchema.isIdentifier(name) else {
            throw OStackError(.unknownObject, context: .init(object: nil), detail: "object name is not an identifier")
        }
        let row = try store.rows("SELECT * FROM meta_objects WHERE name = ?", [.text(name)]).first
        let cached: (schema: ObjectSchema, version: Int, etag: String?, fetched: Double)? = row.flatMap { row in
            guard let text = row.text("item"), let item = JSONValue.parse(Array(text.utf8)),
                let schema = ObjectSchema(item: item)
            else { return nil }
            let fetched: Double = if case .real(let value) = row["fetched_at"] { value } else { 0 }
            return (schema, Int(row.int("schema_version") ?? 1), row.text("etag"), fetched)
        }
        if let cached, store.now - cached.fetched < ttl {
            return Cached(schema: cached.schema, schemaVersion: cached.version, stale: false)
        }
        guard let api else {
            if let cached { return Cached(schema: cached.schema, schemaVersion: cached.version, stale: true) }
            throw OStackError(.offline, detail: "no metadata cached and no connection")
        }
        let outcome: DataAPI.Outcome
        do {
            outcome = try api.exchange(
                .objectMetadata(name: name), headers: cached?.etag.map { [("If-None-Match", $0)] } ?? [])
        } catch let error where [.offline, .timeout, .tls].contains(error.code) {
            if let cached { return Cached(schema: cached.schema, schemaVersion: cached.version, stale: true) }
            throw error
        }
        if outcome.response.status == 304, let cached {
            try store.run("UPDATE meta_objects SET fetched_at = ? WHERE name = ?", [.real(store.now), .text(name)])
            return Cached(schema: cached.schema, schemaVersion: cached.version, stale: false)
        }
        guard outcome.ok else {
            var error = outcome.error.asOStackError(account: api.account.alias, host: api.account.server.authority)
            if error.code == .notFound { error.code = .unknownObject }
            error.context.object = name
            throw error
        }
        guard var item = outcome.json?["item"], case .object(var members) = item else {
            throw OStackError(
                .unexpectedResponse, context: .init(host: api.account.server.authority), detail: "meta item malformed")
        }
        if let order = JSONKeyOrder.members(at: ["item", "fields"], in: outcome.response.body), !order.isEmpty {
            members[ObjectSchema.fieldOrderKey] = .array(order.map(JSONValue.string))
            item = .object(members)
        }
        guard let schema = ObjectSchema(item: item), schema.name == name else {
            throw OStackError(
                .unexpectedResponse, context: .init(host: api.account.server.authority), detail: "meta item malformed")
        }
        let fingerprint = schema.fingerprint
        let previousFingerprint = row?.text("fingerprint")
        var version = cached?.version ?? 1
        if let previousFingerprint, previousFingerprint != fingerprint { version += 1 }
        try store.transaction { () throws(OStackError) in
            try store.run(
                "INSERT OR REPLACE INTO meta_objects (name, etag, item, fetched_at, fingerprint, schema_version) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .text(name), outcome.response.header("ETag").map { .text($0) } ?? .null,
                    .text(String(decoding: item.serialized(), as: UTF8.self)), .real(store.now), .text(fingerprint),
                    .integer(Int64(version)),
                ])
            if previousFingerprint != nil && previousFingerprint != fingerprint {
                try revalidate(schema, version: version)
            }
        }
        return Cached(schema: schema, schemaVersion: version, stale: false)
    }

    /// Re-checks every local record of the object against a changed schema and flags the ones that
    /// no longer pass (shown by `records list --local` and `doctor`; a flagged record is still kept).
    @discardableResult
    public func revalidate(_ schema: ObjectSchema, version: Int) throws(OStackError) -> Int {
        let validator = FieldValidator(schema: schema)
        var invalid = 0
        // Rows a newer level supersedes are not records any more: not counted (nor updated).
        let superseded = try store.index.superseded(schema.name, levels: try store.index.levels(schema.name))
        for row in try store.rows("SELECT rid, data FROM records WHERE object = ?", [.text(schema.name)]) {
            guard let rid = row.int("rid"), !superseded.contains(rid), let text = row.text("data"),
                let data = JSONValue.parse(Array(text.utf8))?.objectValue
            else { continue }
            let bad = !validator.problems(in: data.filter { schema.isKnown($0.key) }, complete: true).isEmpty
            if bad { invalid += 1 }
            try store.run(
                "UPDATE OR FAIL records SET schema_version = ?, invalid = ? WHERE rid = ?",
                [.integer(Int64(version)), .integer(bad ? 1 : 0), .integer(rid)])
        }
        try store.setValue("schema.\(schema.name).changed-at", String(store.now))
        return invalid
    }

    /// Every object's metadata (`objects list`).
    public func objectList() throws(OStackError) -> (json: JSONValue, stale: Bool) {
        try document(.objects, kind: "objects")
    }

    /// The apps the user may enter (`apps list`). ObjectStack resolves `/me/apps` through a session
    /// only, so for an API key it answers an empty list that says nothing about the key's access:
    /// that answer is never cached as the truth.
    public func apps() throws(OStackError) -> (json: JSONValue, stale: Bool) {
        if let api, api.account.credentialKind == .apiKey { return (try api.call(.apps), false) }
        return try document(.apps, kind: "apps")
    }

    /// A cached document: fresh within the TTL, else fetched, stale offline.
    func document(_ endpoint: Endpoint, kind: String) throws(OStackError) -> (json: JSONValue, stale: Bool) {
        let cached = try store.cachedDocument(kind)
        if let cached, store.now - cached.fetchedAt < ttl { return (cached.json, false) }
        guard let api else {
            if let cached { return (cached.json, true) }
            throw OStackError(.offline, detail: "no cached \(kind)")
        }
        let json: JSONValue
        do {
            json = try api.call(endpoint)
        } catch let error where [.offline, .timeout, .tls].contains(error.code) {
            if let cached { return (cached.json, true) }
            throw error
        }
        try store.cacheDocument(kind, json)
        return (json, false)
    }
}

extension LocalStore {
    /// A document kept in `meta_documents` (object list, apps, discovery) and when it was fetched.
    public func cachedDocument(_ kind: String) throws(OStackError) -> (json: JSONValue, fetchedAt: Double)? {
        let row = try rows("SELECT body, fetched_at FROM meta_documents WHERE kind = ?", [.text(kind)]).first
        guard let row, let text = row.text("body"), let json = JSONValue.parse(Array(text.utf8)) else { return nil }
        let fetched: Double = if case .real(let value) = row["fetched_at"] { value } else { 0 }
        return (json, fetched)
    }

    public func cacheDocument(_ kind: String, _ json: JSONValue) throws(OStackError) {
        try run(
            "INSERT OR REPLACE INTO meta_documents (kind, body, fetched_at) VALUES (?, ?, ?)",
            [.text(kind), .text(String(decoding: json.serialized(), as: UTF8.self)), .real(now)])
    }
}
