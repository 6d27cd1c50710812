/// A JSON value. Objects keep their key order (records print in a stable, readable order).
public indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            guard a.count == b.count else { return false }
            let right = Dictionary(b, uniquingKeysWith: { first, _ in first })
            return a.allSatisfy { right[$0.0] == $0.1 }
        default: return false
        }
    }

    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var numberValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: [(String, JSONValue)]? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

// MARK: Serialising

extension JSONValue {
    /// Compact JSON bytes.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [110, 117, 108, 108])
        case .bool(let value): out.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
        case .number(let value): Self.writeNumber(value, to: &out)
        case .string(let value): Self.writeString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(member.0, to: &out)
                out.append(UInt8(ascii: ":"))
                member.1.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeNumber(_ value: Double, to out: inout [UInt8]) {
        if value.isNaN || value.isInfinite {
            out.append(contentsOf: Array("null".utf8))
        } else if value == value.rounded(), abs(value) < 1e15 {
            out.append(contentsOf: Array(String(Int64(value)).utf8))
        } else {
            out.append(contentsOf: Array(String(value).utf8))
        }
    }

    static let hexDigits = Array("0123456789abcdef".utf8)

    /// A string with JSON's escapes. The bytes between two that need one are appended as one run:
    /// appending byte by byte took half of the server's time while it served a pull's pages.
    static func writeString(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for index in utf8.indices {
                let byte = utf8[index]
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                start = index + 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
                case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
                case 0x0A: out.append(contentsOf: [92, 110])
                case 0x0D: out.append(contentsOf: [92, 114])
                case 0x09: out.append(contentsOf: [92, 116])
                default:
                    out.append(contentsOf: [92, 117, 48, 48, hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: Parsing

public struct JSONParseError: Error, Sendable, Equatable {
    public var offset: Int
}

extension JSONValue {
    /// Strict RFC 8259 parsing (no trailing garbage, depth ≤ 256).
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw JSONParseError(offset: parser.index) }
        return value
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

struct JSONParser {
    let bytes: [UInt8]
    var index = 0

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    func fail() -> JSONParseError { JSONParseError(offset: index) }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < 256, index < bytes.count else { throw fail() }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            var members: [(String, JSONValue)] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail() }
                let key = try parseString()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail() }
                index += 1
                skipWhitespace()
                members.append((key, try parseValue(depth: depth + 1)))
                skipWhitespace()
                guard index < bytes.count else { throw fail() }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                throw fail()
            }
        case UInt8(ascii: "["):
            index += 1
            var values: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(values)
            }
            while true {
                skipWhitespace()
                values.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                guard index < bytes.count else { throw fail() }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(values) }
                throw fail()
            }
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default: return .number(try parseNumber())
        }
    }

    mutating func literal(_ word: String) throws(JSONParseError) {
        let expected = Array(word.utf8)
        guard index + expected.count <= bytes.count, Array(bytes[index..<index + expected.count]) == expected else {
            throw fail()
        }
        index += expected.count
    }

    mutating func parseNumber() throws(JSONParseError) -> Double {
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (48...57).contains(bytes[index]) else { throw fail() }
        if bytes[index] == 48 {
            index += 1
        } else {
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, (48...57).contains(bytes[index]) else { throw fail() }
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, (48...57).contains(bytes[index]) else { throw fail() }
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else { throw fail() }
        return value
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw fail() }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                break
            }
            if byte < 0x20 { throw fail() }
            if byte != UInt8(ascii: "\\") {
                out.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw fail() }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    else { throw fail() }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail() }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail()
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw fail() }
                out.append(contentsOf: Array(String(Character(unicode)).utf8))
            default: throw fail()
            }
        }
        guard let text = String(validating: out, as: UTF8.self) else { throw fail() }
        return text
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 48...57: digit = UInt32(byte - 48)
            case 97...102: digit = UInt32(byte - 87)
            case 65...70: digit = UInt32(byte - 55)
            default: throw fail()
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }
}
