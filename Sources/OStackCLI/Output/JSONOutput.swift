import FoundationEssentials
import OStackCore

/// A member of a `--json` document that is always there, `null` when empty (docs/commands.md
/// documents such keys as `…|null`): a synthesized encoding leaves a nil optional out.
@propertyWrapper
struct AlwaysPresent<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(wrappedValue)  // an empty optional is `null`
    }
}

/// Encodes the `--json` documents (docs/commands.md, "JSON output"): one document per command, sorted keys, ISO-8601
/// UTC dates, no escaped slashes.
public enum JSONOutput {
    /// The items of a list document (`{"accounts":[…]}`: an object whose one member is an array);
    /// nil for any other document.
    static func listItems<T: Encodable>(_ document: T) -> [JSONValue]? {
        guard case .object(let members)? = JSONValue.parse(Array(encode(document).utf8)), members.count == 1,
            case .array(let items)? = members.values.first
        else { return nil }
        return items
    }

    public static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(value) else { return "{}" }
        return escapeTerminalControls(String(decoding: data, as: UTF8.self))
    }

    /// JSONEncoder escapes C0 controls only: DEL, C1 controls (`0x9B` starts a CSI on many
    /// terminals), line and paragraph separators and bidirectional controls are escaped too, as
    /// `\uXXXX`. They can only occur inside strings, so the document means the same.
    static func escapeTerminalControls(_ json: String) -> String {
        var result = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            let value = scalar.value
            if value == 0x7F || (0x80...0x9F).contains(value) || value == 0x2028 || value == 0x2029
                || ErrorPresenter.isBidiControl(value)
            {
                let hex = String(value, radix: 16, uppercase: false)
                result.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return String(result)
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

    /// What `--json` writes on stderr for a warning (a command that still succeeded).
    public struct WarningDocument: Encodable {
        public var warning: ErrorDocument.Body
    }
}
