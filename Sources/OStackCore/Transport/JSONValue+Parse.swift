import FoundationEssentials

extension JSONValue {
    /// The JSON text `bytes` as a value, or nil when it is not JSON: exactly what decoding
    /// `JSONValue` with `JSONDecoder` gives. Ordinary text (no `\u` escapes, no duplicate keys,
    /// numbers in range, nesting under 64 levels) is read directly, about ten times faster than the
    /// decoder's try-each-type decoding; anything else, valid or not, is handed to `JSONDecoder`,
    /// which decides. A randomized test compares the two on valid and broken text.
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        if let direct = parseDirectly(bytes) { return direct }
        return try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    /// The direct reading alone: nil for text it leaves to `JSONDecoder`.
    static func parseDirectly(_ bytes: [UInt8]) -> JSONValue? {
        bytes.withUnsafeBytes { raw -> JSONValue? in
            var reader = DirectReader(bytes: raw)
            return reader.document()
        }
    }
}

/// Reads the common case of JSON text; nil means "not handled here" (never "invalid").
private struct DirectReader {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func document() -> JSONValue? {
        skipSpace()
        guard let value = value(depth: 0) else { return nil }
        skipSpace()
        // (Spelled out: JSONValue is ExpressibleByNilLiteral, and `? value : nil` would be `.null`.)
        guard index == bytes.count else { return nil }
        return value
    }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func literal(_ text: StaticString, _ value: JSONValue) -> JSONValue? {
        let count = text.utf8CodeUnitCount
        guard bytes.count - index >= count else { return nil }
        let start = text.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] { return nil }
        index += count
        return value
    }

    private mutating func value(depth: Int) -> JSONValue? {
        guard index < bytes.count, depth < 64 else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "n"): return literal("null", .null)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return nil
        }
    }

    private mutating func array(depth: Int) -> JSONValue? {
        index += 1  // [
        var elements: [JSONValue] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipSpace()
            guard let element = value(depth: depth + 1) else { return nil }
            elements.append(element)
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: return nil
            }
        }
    }

    private mutating func object(depth: Int) -> JSONValue? {
        index += 1  // {
        var members: [String: JSONValue] = [:]
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            guard let member = value(depth: depth + 1) else { return nil }
            // A repeated key: the decoder decides which one counts.
            guard members.updateValue(member, forKey: key) == nil else { return nil }
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: return nil
            }
        }
    }

    /// A string without `\u` escapes or raw control characters, in valid UTF-8.
    private mutating func string() -> String? {
        index += 1  // opening quote
        let start = index
        var escaped = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { return nil }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                index += 2
            } else {
                index += 1
            }
        }
        guard index < bytes.count else { return nil }
        let end = index
        index += 1  // closing quote
        let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
        guard escaped else { return String(validating: raw, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(raw.count)
        var position = 0
        while position < raw.count {
            let byte = raw[position]
            position += 1
            guard byte == UInt8(ascii: "\\") else {
                decoded.append(byte)
                continue
            }
            guard position < raw.count else { return nil }
            let code = raw[position]
            position += 1
            switch code {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(code)
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0C)
            case UInt8(ascii: "n"): decoded.append(0x0A)
            case UInt8(ascii: "r"): decoded.append(0x0D)
            case UInt8(ascii: "t"): decoded.append(0x09)
            default: return nil  // \u (and anything invalid): the decoder's
            }
        }
        return String(validating: decoded, as: UTF8.self)
    }

    /// A number by JSON's grammar whose value is finite.
    private mutating func number() -> JSONValue? {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() > 0 else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { return nil }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        // Out of range either way (infinite, or a non-zero number that rounds to zero or below the
        // normal range): the decoder decides.
        guard let value = Double(text), value.isFinite else { return nil }
        if value == 0 || abs(value) < Double.leastNormalMagnitude {
            let mantissa = text.prefix { $0 != "e" && $0 != "E" }
            guard !mantissa.contains(where: { $0 >= "1" && $0 <= "9" }) else { return nil }
        }
        return .number(value)
    }

    private mutating func digits() -> Int {
        let start = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
        return index - start
    }
}
