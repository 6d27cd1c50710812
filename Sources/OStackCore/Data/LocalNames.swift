import PlatformKit
import SQLCipherKit

/// Names a shell completion offers for one account, from its local database only: the objects of the
/// cached metadata and the tracked objects, the queued changes and the conflicts. Never the network;
/// the data key comes from the keyring or, for an account with a PIN, from the agent — so a locked
/// account is `locked`, and the caller offers nothing. Nothing is written: no audit flush, no state file.
public struct LocalNames: Sendable, Equatable {
    public var objects: [String] = []
    public var queueEntries: [String] = []
    public var conflicts: [String] = []

    public init() {}

    public static func read(_ account: Account, environment: AuthEnvironment) throws(OStackError) -> LocalNames {
        let key = try environment.databaseKey(account)
        let database = try AccountDatabase.openExisting(layout: environment.layout, account: account, key: key)
        let store = try LocalStore(database: database, clock: environment.clock)
        var names = LocalNames()
        var objects = Set(try store.trackedObjects())
        if let cached = try store.cachedDocument("objects") {
            for item in cached.json["items"]?.arrayValue ?? [] {
                if let name = item["name"]?.stringValue, ObjectSchema.isIdentifier(name) { objects.insert(name) }
            }
        }
        names.objects = objects.sorted()
        let entries = try store.entries()
        names.queueEntries = entries.map(\.id)
        names.conflicts = entries.filter { $0.status == .conflict }.map(\.id)
        return names
    }
}
