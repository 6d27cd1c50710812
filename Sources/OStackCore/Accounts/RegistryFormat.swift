import FoundationEssentials
import PlatformKit

/// The on-disk formats of the account registry and the versioned steps between them.
///
/// Upgrades (docs/storage.md, "Format upgrades"): copy (the old file is kept as
/// `accounts.v<N>.json`), transform, verify (the new document decodes and holds the same
/// accounts), then replace atomically. Every step is idempotent; anything unexpected stops the
/// migration with `unsupported-format` and leaves the data as it was. A registry written by a newer
/// ostack is refused, never rewritten.
public enum RegistryFormat {
    public static let currentVersion = 2

    struct Document: Codable, Equatable {
        var version: Int
        var accounts: [Account]
    }

    /// Just the version number, to pick the decoder.
    private struct VersionProbe: Decodable { var version: Int }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = Timestamp.decodingStrategy
        return decoder
    }

    static func encode(_ document: Document) throws(OStackError) -> [UInt8] {
        do {
            return Array(try encoder().encode(document)) + [0x0A]
        } catch {
            throw OStackError(.internal, detail: "encoding the registry failed")
        }
    }

    /// How a registry that is not JSON with a version, or not of its own version's shape, is shown:
    /// damaged, not "from another version" (which sends the user looking for one).
    static let damaged = OStackError.Context(
        object: "The account registry (accounts.json)",
        suggestion:
            "Restore it from a backup. The accounts' data directories are untouched, but without the registry they are not known."
    )

    static func version(of bytes: [UInt8]) throws(OStackError) -> Int {
        do {
            return try decoder().decode(VersionProbe.self, from: Data(bytes)).version
        } catch {
            throw OStackError(
                .unsupportedFormat, context: Self.damaged, detail: "the registry is not valid JSON with a version")
        }
    }

    /// Decodes the registry, migrating an older format first (under the registry lock).
    static func decodeCurrent(_ bytes: [UInt8], migrateWith registry: AccountRegistry) throws(OStackError)
        -> Document
    {
        // The common case in one pass: a current document decodes as one. Anything else (an older or
        // newer format, damage) takes the version probe below, which decides what happens.
        if let document = try? decoder().decode(Document.self, from: Data(bytes)), document.version == currentVersion {
            return document
        }
        let found = try version(of: bytes)
        if found == currentVersion { return try decode(bytes) }
        if found > currentVersion {
            throw OStackError(
                .unsupportedFormat, detail: "registry version \(found) is newer than this ostack (\(currentVersion))")
        }
        return try registry.withLock { () throws(OStackError) -> Document in
            // Re-read inside the lock: another process may have migrated meanwhile.
            guard let latest = try registry.read() else { return Document(version: currentVersion, accounts: []) }
            let latestVersion = try version(of: latest)
            if latestVersion == currentVersion { return try decode(latest) }
            return try migrate(latest, from: latestVersion, registry: registry)
        }
    }

    static func decode(_ bytes: [UInt8]) throws(OStackError) -> Document {
        do {
            return try decoder().decode(Document.self, from: Data(bytes))
        } catch let error as UnsafeEntry {
            throw OStackError(.unsupportedFormat, context: Self.damaged, detail: error.detail)
        } catch {
            throw OStackError(
                .unsupportedFormat, context: Self.damaged,
                detail: "the registry does not match format \(currentVersion)")
        }
    }

    /// An entry that decodes but that ostack must not act on: its files would be another account's,
    /// or outside the accounts' directory (`accounts remove` deletes an account's directory).
    struct UnsafeEntry: Error {
        var detail: String
    }

    /// Whether `name` is a data directory name ostack makes (`acct-` and 16 lowercase hex digits):
    /// nothing else is ever joined to the accounts' directory.
    static func isDataDirectoryName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        return bytes.count == 21 && bytes.starts(with: Array("acct-".utf8))
            && bytes.dropFirst(5).allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// No C0 or C1 control, DEL, or bidirectional control in `text`.
    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { scalar in
            let value = scalar.value
            return value >= 0x20 && !(0x7F...0x9F).contains(value) && !(0x200E...0x200F).contains(value)
                && !(0x202A...0x202E).contains(value) && !(0x2066...0x2069).contains(value)
        }
    }

    /// Runs every step from `version` up to `currentVersion`.
    static func migrate(_ original: [UInt8], from version: Int, registry: AccountRegistry) throws(OStackError)
        -> Document
    {
        guard version >= 1 else { throw OStackError(.unsupportedFormat, detail: "unknown registry version") }
        // 1. Copy: keep the original bytes beside the registry (idempotent: same bytes each time).
        let backup = registry.layout.dataDirectory + "/accounts.v\(version).json"
        try registry.writeRaw(original, to: backup)
        // 2. Transform in memory.
        var document: Document
        switch version {
        case 1: document = try V1.upgrade(original)
        default: throw OStackError(.unsupportedFormat, detail: "no migration from registry version \(version)")
        }
        document.version = currentVersion
        // 3. Verify: the new bytes decode to the same document.
        let encoded = try encode(document)
        guard try decode(encoded) == document else {
            throw OStackError(.unsupportedFormat, detail: "registry migration did not verify")
        }
        // 4. Replace atomically. The backup is kept for forward compatibility and support.
        try registry.writeRaw(encoded, to: registry.layout.registryFile)
        return document
    }

    /// Format 1 (ostack 0.0.x): flat keys, `serverURL` as typed by the user, `name`, `dir`, epoch
    /// seconds, no credential kind or session state.
    enum V1 {
        struct Entry: Decodable {
            var id: String
            var alias: String
            var serverURL: String
            var userId: String
            var email: String
            var name: String
            var created: Double
            var lastUsed: Double
            var dir: String
            var apiKey: Bool?
        }

        struct File: Decodable {
            var version: Int
            var accounts: [Entry]
        }

        static func upgrade(_ bytes: [UInt8]) throws(OStackError) -> Document {
            let file: File
            do {
                file = try JSONDecoder().decode(File.self, from: Data(bytes))
            } catch {
                throw OStackError(.unsupportedFormat, detail: "registry version 1 is malformed")
            }
            var accounts: [Account] = []
            for entry in file.accounts {
                guard let id = AccountID(rawValue: entry.id) else {
                    throw OStackError(.unsupportedFormat, detail: "registry version 1 has an invalid account id")
                }
                let server = try ServerURL(parsing: entry.serverURL, allowInsecureHTTP: true)
                guard server.authority == id.host, id.userID == entry.userId else {
                    throw OStackError(.unsupportedFormat, detail: "registry version 1 entry is inconsistent")
                }
                accounts.append(
                    Account(
                        id: id, alias: entry.alias, server: server, userID: entry.userId, email: entry.email,
                        displayName: entry.name, createdAt: Date(timeIntervalSince1970: entry.created),
                        lastUsedAt: Date(timeIntervalSince1970: entry.lastUsed), keyringBackend: "secret-service",
                        dataDirectory: entry.dir, credentialKind: entry.apiKey == true ? .apiKey : .session,
                        sessionState: .signedIn, sessionExpiresAt: nil, sessionRefreshedAt: nil))
            }
            return Document(version: currentVersion, accounts: accounts)
        }
    }
}

extension RegistryFormat.Document {
    /// Decodes, then refuses entries whose data directory is not a name ostack made, or is another
    /// entry's (a hand-edited `"dataDirectory": ".."` would make `accounts remove` delete far more
    /// than the account).
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        accounts = try container.decode([Account].self, forKey: .accounts)
        var seen = Set<String>()
        for account in accounts {
            // Aliases and ids are printed by many commands: one with control characters is not one
            // ostack wrote. (Only that is checked: an alias older versions made from an e-mail
            // address may not meet today's rule for aliases given by hand.)
            guard RegistryFormat.isPrintable(account.alias), RegistryFormat.isPrintable(account.id.rawValue) else {
                throw RegistryFormat.UnsafeEntry(detail: "an account's alias or id has control characters")
            }
            guard RegistryFormat.isDataDirectoryName(account.dataDirectory) else {
                throw RegistryFormat.UnsafeEntry(detail: "an account's data directory is not an acct-<16 hex> name")
            }
            guard seen.insert(account.dataDirectory).inserted else {
                throw RegistryFormat.UnsafeEntry(detail: "two accounts share a data directory")
            }
        }
    }
}
