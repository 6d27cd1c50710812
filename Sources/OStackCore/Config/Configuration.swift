import FoundationEssentials
import PlatformKit

/// User configuration (`config.json`, 0600): the default account and settings. The default account
/// is stored here, never in the keyring (docs/storage.md). Writes are atomic, under `locks/config.lock`.
public struct Configuration: Sendable, Equatable, Codable {
    public static let currentVersion = 1

    public var version: Int = Configuration.currentVersion
    /// The account used when neither `--account` nor `OSTACK_ACCOUNT` picks one.
    public var defaultAccount: AccountID?
    /// The server used by the last successful `login`, offered when `--server` is omitted.
    public var lastServer: String?
    /// Free-form settings (`ostack config get|set|list`), e.g. `keyring.backend`, `agent.idle-timeout`.
    public var settings: [String: String] = [:]

    public init() {}
}

/// Reads and writes `Configuration`.
public struct ConfigurationStore: Sendable {
    public let layout: FileLayout

    public init(layout: FileLayout) {
        self.layout = layout
    }

    public func load() throws(OStackError) -> Configuration {
        let bytes: [UInt8]?
        do {
            bytes = try SecureFileSystem.readFile(layout.configFile)
        } catch {
            // A link there (a dotfile manager's) is named, not "Local storage failed … disk space".
            throw OStackError.storage(error, role: "the configuration file (\(layout.configFile))")
        }
        guard let bytes else { return Configuration() }
        let configuration: Configuration
        do {
            configuration = try JSONDecoder().decode(Configuration.self, from: Data(bytes))
        } catch {
            throw OStackError(
                .unsupportedFormat,
                context: .init(
                    object: "The configuration (config.json)",
                    suggestion:
                        "Restore it from a backup, or move it aside: the next command then starts with default settings (and no default account)."
                ), detail: "config.json is not valid")
        }
        guard configuration.version <= Configuration.currentVersion else {
            throw OStackError(.unsupportedFormat, detail: "config.json is from a newer ostack")
        }
        return configuration
    }

    /// Read-modify-write under the config lock, atomically replacing the file.
    @discardableResult
    public func update<R>(_ body: (inout Configuration) throws(OStackError) -> R) throws(OStackError) -> R {
        try layout.checkHome()  // another user's home is refused by name, not as "storage failed"
        do {
            try layout.createDirectories()
            let lock = try FileLock(path: layout.locksDirectory + "/config.lock", timeout: 10)
            defer { withExtendedLifetime(lock) {} }
            var configuration = try load()
            let result = try body(&configuration)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let bytes = Array(try encoder.encode(configuration)) + [0x0A]
            try SecureFileSystem.writeAtomically(bytes, to: layout.configFile)
            return result
        } catch let error as OStackError {
            throw error
        } catch {
            throw OStackError(.storageFailure, detail: "writing config: \(error)")
        }
    }
}
