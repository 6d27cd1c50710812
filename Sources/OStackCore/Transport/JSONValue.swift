import FoundationEssentials

/// A JSON value as the core sees server payloads: records, metadata and error bodies.
public indirect enum JSONValue: Sendable, Equatable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            if value.rounded() == value, abs(value) < 9.0e15 {
                try container.encode(Int64(value))
            } else {
                try container.encode(value)
            }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Compact JSON, keys sorted, slashes not escaped: exactly what `JSONEncoder` with
    /// `[.sortedKeys, .withoutEscapingSlashes]` writes. Values made of ASCII keys, strings without
    /// control characters and whole numbers within ±9e15 — nearly every record — are written
    /// directly (about ten times faster); anything else goes through `JSONEncoder` itself.
    public func serialized() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        if writeDirectly(into: &bytes) { return bytes }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? Array(encoder.encode(self))) ?? Array("null".utf8)
    }

    /// False (leaving `bytes` unusable) when the value needs `JSONEncoder`'s own formatting.
    func writeDirectly(into bytes: inout [UInt8], depth: Int = 0) -> Bool {
        // Deeper than JSONEncoder goes: it decides (it refuses, and `serialized` writes null).
        guard depth < 512 else { return false }
        switch self {
        case .null: bytes.append(contentsOf: "null".utf8)
        case .bool(let value): bytes.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let value):
            guard value.rounded() == value, abs(value) < 9.0e15 else { return false }
            bytes.append(contentsOf: String(Int64(value)).utf8)
        case .string(let value):
            return Self.writeString(value, into: &bytes, asciiOnly: false)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                guard element.writeDirectly(into: &bytes, depth: depth + 1) else { return false }
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            // ASCII keys only (checked below): for them `<` is byte order, as JSONEncoder sorts.
            for key in members.keys.sorted() {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                guard Self.writeString(key, into: &bytes, asciiOnly: true) else { return false }
                bytes.append(UInt8(ascii: ":"))
                guard members[key]!.writeDirectly(into: &bytes, depth: depth + 1) else { return false }
            }
            bytes.append(UInt8(ascii: "}"))
        }
        return true
    }

    /// A string with `"` and `\` escaped; false for control characters (JSONEncoder's escapes) and,
    /// with `asciiOnly`, for non-ASCII text.
    private static func writeString(_ value: String, into bytes: inout [UInt8], asciiOnly: Bool) -> Bool {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            if byte < 0x20 || (asciiOnly && byte >= 0x80) { return false }
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
        return true
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var doubleValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// A whole number within ±2^53 (what JSON numbers hold exactly); nil for anything else, so a
    /// number from the wire can never trap a conversion.
    public var intValue: Int? {
        guard case .number(let value) = self, value.isFinite, value.rounded() == value,
            abs(value) <= 9_007_199_254_740_992
        else { return nil }
        return Int(value)
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var isNull: Bool { self == .null }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByIntegerLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
