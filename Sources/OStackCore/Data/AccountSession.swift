import FoundationEssentials
import PlatformKit
import SQLCipherKit

/// One account's open data for the length of a command (docs/architecture.md): its SQLCipher
/// database (opening it needs the account's data key, so a locked PIN-protected account is `locked`,
/// exit 4), the data API, the metadata cache and the audit trail. It hands out the services the
/// commands use — `reads`, `writes`, `sync` — each a small value over this session.
public final class AccountSession: @unchecked Sendable {
    // @unchecked: owns one database connection; a command uses it from one task.
    public let account: Account
    public let environment: AuthEnvironment
    public let store: LocalStore
    public let api: DataAPI
    public var metadata: MetadataCache
    /// The account's tamper-evident trail (docs/audit.md).
    public let audit: AuditTrail
    /// The `sync.lookback` setting, when set (`SyncEngine.lookbackMilliseconds`).
    let syncLookbackMilliseconds: Int64?

    public init(account: Account, environment: AuthEnvironment) throws(OStackError) {
        self.account = account
        self.environment = environment
        let key = try environment.databaseKey(account)
        let database: Database
        do {
            database = try AccountDatabase.openExisting(layout: environment.layout, account: account, key: key)
        } catch {
            var error = error
            if error.context.account == nil { error.context.account = account.alias }  // named in the message
            if error.code == .storageUnreadable {
                // The account's own trail is in the database that failed to open: the global one records it.
                environment.auditGlobal("database.open", outcome: "failed", details: ["account": account.id.rawValue])
            }
            throw error
        }
        let store = try LocalStore(database: database, clock: environment.clock)
        self.store = store
        let auth = AuthAPI(account: account, transport: environment.transport)
        let scoped = account.environment != nil
        let directory = ServerDirectory { Self.loadDiscovery(store: store, auth: auth, scoped: scoped) }
        // The settings this session uses, read once (config.json is read whole for each value).
        let settings = (try? environment.configuration.load())?.settings ?? [:]
        syncLookbackMilliseconds = settings["sync.lookback"].flatMap(Setting.lookback)
        let setting = settings["locale"] ?? "auto"
        let locale = Setting.acceptLanguage(setting: setting, environment: ProcessEnvironment.current())
        api = DataAPI(
            account: account, keeper: SessionKeeper(environment: environment), directory: directory, locale: locale)
        metadata = MetadataCache(store: store, api: api)
        ObjectSchema.preferredLocale = locale
        try metadata.useLocale(locale)
        audit = try AuditTrail(
            store: store, databaseKey: key, anchorKey: environment.namespaces.key(account.id, .auditAnchor),
            secrets: environment.secrets)
        // Events recorded while the database was closed (or locked) join the chain now.
        try audit.flush(environment.auditBuffer(account))
    }

    public var reads: RecordReads { RecordReads(session: self) }
    public var writes: RecordWrites { RecordWrites(session: self) }
    public var sync: SyncService { SyncService(session: self) }

    /// The server's discovery document: cached in the account's database for a day, else fetched
    /// (the account's discovery route, then `/.well-known/objectstack`); when neither works, the
    /// cached copy however old, or the routes recorded at sign-in.
    static func loadDiscovery(store: LocalStore, auth: AuthAPI, scoped: Bool) -> Discovery {
        let cached = try? store.cachedDocument("discovery")
        if let cached, store.now - cached.fetchedAt < 86_400, let discovery = Discovery(document: cached.json) {
            return discovery
        }
        if let (discovery, document) = try? auth.discover(wellKnown: !scoped) {
            try? store.cacheDocument("discovery", document)
            return discovery
        }
        return cached.flatMap { Discovery(document: $0.json) } ?? Discovery(routes: auth.routes)
    }

    // MARK: Locking

    /// One sync (push or pull) per account at a time, across processes. Under this lock every
    /// `in_progress` claim found is stale.
    public func withSyncLock<R>(_ body: () throws(OStackError) -> R) throws(OStackError) -> R {
        let lock: FileLock
        do {
            try SecureFileSystem.createDirectory(environment.layout.locksDirectory)
            lock = try FileLock(
                path: environment.layout.locksDirectory + "/sync-\(account.dataDirectory).lock",
                timeout: environment.lockTimeout)
        } catch {
            throw OStackError(.storageFailure, context: .init(account: account.alias), detail: "sync lock: \(error)")
        }
        return try withExtendedLifetime(lock) { () throws(OStackError) -> R in try body() }
    }

    public func engine() -> SyncEngine {
        var engine = SyncEngine(store: store, api: api)
        engine.conditionalBatches = api.directory.discovery.conditionalBatch
        if let syncLookbackMilliseconds { engine.lookbackMilliseconds = syncLookbackMilliseconds }
        return engine
    }

    // MARK: Metadata

    /// The schema, or nil when none is cached and the server cannot be reached (writes are then
    /// queued unchecked; the server validates them on push).
    public func schemaIfAvailable(_ object: String) throws(OStackError) -> ObjectSchema? {
        do {
            return try metadata.object(object).schema
        } catch let error where [.offline, .timeout, .tls].contains(error.code) {
            return nil
        }
    }

    // MARK: After a change

    /// After anything that changed the account's data: the trail's head is anchored in the keyring
    /// and `state.json` is brought up to date (both best effort).
    public func didChange() {
        audit.anchor()
        try? writeStateSummary()
    }

    /// `state.json` beside the database: queue counts and the last sync, for `status` (which must
    /// work without the keyring and while locked). Counts and a time only — no record content.
    public func writeStateSummary() throws(OStackError) {
        let counts = try store.counts()
        let summary = AccountStateSummary(
            pending: counts.pending, failed: counts.failed, conflict: counts.conflict, lastSyncAt: try lastSyncAt())
        try? summary.write(to: environment.layout.accountDirectory(account.dataDirectory) + "/state.json")
    }

    public func lastSyncAt() throws(OStackError) -> Date? {
        try store.value("sync.last-at").flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }
}

/// The non-secret summary `status` reads without opening the database.
public struct AccountStateSummary: Codable, Sendable, Equatable {
    public var pending: Int
    public var failed: Int
    public var conflict: Int
    public var lastSyncAt: Date?

    public init(pending: Int, failed: Int, conflict: Int, lastSyncAt: Date?) {
        self.pending = pending
        self.failed = failed
        self.conflict = conflict
        self.lastSyncAt = lastSyncAt
    }

    public func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        try SecureFileSystem.writeAtomically(Array(try encoder.encode(self)), to: path)
    }

    public static func read(_ path: String) -> AccountStateSummary? {
        guard let bytes = try? SecureFileSystem.readFile(path) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = Timestamp.decodingStrategy
        guard let summary = try? decoder.decode(AccountStateSummary.self, from: Data(bytes)) else { return nil }
        // Counts no queue can hold (a hand-edited or damaged file) make the file unreadable, so sums
        // of them (`status --short` runs at every prompt) cannot overflow.
        let plausible = 0...Self.largestCount
        guard [summary.pending, summary.failed, summary.conflict].allSatisfy(plausible.contains) else { return nil }
        return summary
    }

    /// The largest count a summary may carry.
    static let largestCount = 1 << 40
}
