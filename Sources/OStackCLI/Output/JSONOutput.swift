import FoundationEssentials

/// Encodes the `--json` documents (docs/commands.md, "JSON output"): one document per command, sorted keys, ISO-8601
/// UTC dates, no escaped slashes.
public enum JSONOutput {
    public static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The error document printed on stderr for a failing command under `--json`.
    public struct ErrorDocument: Encodable {
        public struct Body: Encodable {
            public var code: String
            public var message: String
            public var hint: String?
        }
        public var error: Body
    }
}
