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
    /// Settings written by hand as JSON that is neither text, number, boolean nor null (an object,
    /// an array), as they were: `settings` holds `HandWritten.notText` for them, and a write of the
    /// file puts them back unchanged while they are still that. (An unrelated `config set` replaced
    /// them with the text "(not a text)", and the user's value was lost.)
    var handWritten: [String: JSONValue] = [:]

    public init() {}

    enum CodingKeys: String, CodingKey {
        case version, defaultAccount, lastServer, settings
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decodeIfPresent(Int.self, forKey: .version) ?? Self.currentVersion
        defaultAccount = try container.decodeIfPresent(AccountID.self, forKey: .defaultAccount)
        lastServer = try container.decodeIfPresent(String.self, forKey: .lastServer)
        let values = try container.decodeIfPresent([String: HandWritten].self, forKey: .settings) ?? [:]
        settings = values.compactMapValues(\.text)
        handWritten = values.compactMapValues(\.raw)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encodeIfPresent(defaultAccount, forKey: .defaultAccount)
        try container.encodeIfPresent(lastServer, forKey: .lastServer)
        var written: [String: JSONValue] = [:]
        for (key, value) in settings {
            written[key] = value == HandWritten.notText ? handWritten[key] ?? .string(value) : .string(value)
        }
        try container.encode(written, forKey: .settings)
    }

    /// A setting's value as a hand edit may leave it: a number stands for its text (`300` for
    /// `"300"`), `null` for no value; anything else is kept as a text no setting accepts, so that
    /// the setting is named as not valid rather than the whole file as damaged (which hid the
    /// default account too).
    struct HandWritten: Decodable {
        var text: String?
        /// The value itself when it is none of those.
        var raw: JSONValue?

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                text = nil
            } else if let string = try? container.decode(String.self) {
                text = string
            } else if let integer = try? container.decode(Int.self) {
                text = String(integer)
            } else if let number = try? container.decode(Double.self), number.isFinite {
                text = String(number)
            } else if let flag = try? container.decode(Bool.self) {
                text = String(flag)
            } else {
                text = Self.notText
                raw = try? container.decode(JSONValue.self)
            }
        }

        static let notText = "(not a text)"
    }
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
