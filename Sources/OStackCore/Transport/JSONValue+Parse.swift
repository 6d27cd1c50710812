import FoundationEssentials

extension JSONValue {
    /// The JSON text `bytes` as a value, or nil when it is not JSON: exactly what decoding
    /// `JSONValue` with `JSONDecoder` gives. Text the strict checker (`JSONSyntax`) passes, without
    /// repeated keys, is read directly on the field scanner's byte reader, about ten times faster
    /// than the decoder's try-each-type decoding; anything else, valid or not, is handed to
    /// `JSONDecoder`, which decides. Randomized and edge-case tests compare the two.
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        bytes.withUnsafeBytes { parse($0) }
    }

    public static func parse(_ bytes: UnsafeRawBufferPointer) -> JSONValue? {
        if let direct = parseDirectly(bytes) { return direct }
        return try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    /// The direct reading alone: nil for text it leaves to `JSONDecoder`.
    static func parseDirectly(_ bytes: UnsafeRawBufferPointer) -> JSONValue? {
        var reader = FieldScanner.Reader(bytes: bytes)
        reader.skipSpace()
        guard let value = reader.jsonValue(depth: 0) else { return nil }
        reader.skipSpace()
        // (Spelled out: JSONValue is ExpressibleByNilLiteral, and `? value : nil` would be `.null`.)
        guard reader.index == bytes.count else { return nil }
        return value
    }

    /// For text that is not JSON, the 1-based line where the strict reading stops (the error is
    /// there or just before it); nil for JSON. For saying where a file goes wrong, not for deciding.
    public static func errorLine(_ bytes: [UInt8]) -> Int? {
        guard parse(bytes) == nil else { return nil }
        return bytes.withUnsafeBytes { buffer in
            var reader = FieldScanner.Reader(bytes: buffer)
            reader.skipSpace()
            if reader.jsonValue(depth: 0) != nil { reader.skipSpace() }
            let stop = min(reader.index, buffer.count)
            return 1 + buffer[..<stop].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        }
    }

    static func parseDirectly(_ bytes: [UInt8]) -> JSONValue? {
        bytes.withUnsafeBytes { parseDirectly($0) }
    }

    /// The first member name that appears twice in one object of `bytes` (decoded, so `"a"` and
    /// `"\u0061"` are the same name), or nil. `parse` keeps the first of two, other readers the last:
    /// input with a repeated name is ambiguous, and ostack refuses it instead of choosing. Cheap for
    /// text without one: the direct reading, which refuses a repeated name, is tried first.
    public static func repeatedName(_ bytes: [UInt8]) -> String? {
        guard parseDirectly(bytes) == nil else { return nil }
        return scanForRepeatedName(bytes)
    }

    /// `parse` and `repeatedName` in one: the text read once when it has no repeated name.
    public static func parseNamingRepeats(_ bytes: [UInt8]) -> (value: JSONValue?, repeatedName: String?) {
        if let direct = parseDirectly(bytes) { return (direct, nil) }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else { return (nil, nil) }
        return (value, scanForRepeatedName(bytes))
    }

    /// The structure of JSON text, one pass: each bracket, comma and colon, and each string whole
    /// (escapes included) as the range of its quotes; `body` returns false to stop. Anything else
    /// (numbers, literals, whitespace, bytes that are not JSON) is passed over: for describing text
    /// `parse` refused or reading names it accepted, not for deciding what is JSON.
    enum StructureToken { case open(object: Bool), close, comma, colon, string(ClosedRange<Int>) }

    static func walkStructure(_ bytes: [UInt8], _ body: (StructureToken) -> Bool) {
        var index = 0
        while index < bytes.count {
            let token: StructureToken?
            switch bytes[index] {
            case UInt8(ascii: "{"): token = .open(object: true)
            case UInt8(ascii: "["): token = .open(object: false)
            case UInt8(ascii: "}"), UInt8(ascii: "]"): token = .close
            case UInt8(ascii: ","): token = .comma
            case UInt8(ascii: ":"): token = .colon
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < bytes.count && bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                guard index < bytes.count else { return }  // an unterminated string ends the text
                token = .string(start...index)
            default: token = nil
            }
            if let token, !body(token) { return }
            index += 1
        }
    }

    static func scanForRepeatedName(_ bytes: [UInt8]) -> String? {
        var objects: [Set<String>?] = []  // per open container: the names seen (nil for an array)
        var expectName = false
        var repeated: String?
        walkStructure(bytes) { token in
            switch token {
            case .open(let object):
                objects.append(object ? [] : nil)
                expectName = object
            case .close:
                _ = objects.popLast()
                expectName = false
            case .comma: expectName = objects.last.map { $0 != nil } ?? false
            case .colon: expectName = false
            case .string(let range):
                guard expectName, objects.last.map({ $0 != nil }) == true,
                    let name = parse(Array(bytes[range]))?.stringValue
                else { return true }
                if objects[objects.count - 1]!.contains(name) {
                    repeated = name
                    return false
                }
                objects[objects.count - 1]!.insert(name)
            }
            return true
        }
        return repeated
    }

    /// Why text that `parse` refuses is not a value, in words for a hint after the input's name
    /// (`--data nests 600 levels deep, …`): nesting deeper than any reader here takes (`JSONDecoder`
    /// stops at 512; it was "not valid JSON" for well-formed text), else "is not valid JSON", with
    /// the line when there are several.
    public static func refusal(_ bytes: [UInt8]) -> String {
        var depth = 0
        var deepest = 0
        walkStructure(bytes) { token in
            switch token {
            case .open:
                depth += 1
                deepest = max(deepest, depth)
            case .close: depth -= 1
            default: break
            }
            return true
        }
        // JSONDecoder reads 512 levels; deeper text fails there whatever else is wrong with it.
        if deepest > 512 { return "nests \(deepest) levels deep, more than can be read" }
        let line = errorLine(bytes) ?? 1
        return bytes.contains(0x0A) ? "is not valid JSON (line \(line))" : "is not valid JSON"
    }
}

/// `JSONValue.parse`'s direct reading: `JSONSyntax`'s strict check of each token (strings with their
/// escapes and UTF-8, numbers with their range, literals, depth), then the value it spells; nil
/// where the check fails or a key repeats, which `JSONDecoder` then decides.
extension FieldScanner.Reader {
    mutating func jsonValue(depth: Int) -> JSONValue? {
        guard let byte = current else { return nil }
        switch byte {
        case UInt8(ascii: "{"):
            guard depth < JSONSyntax.maxDepth else { return nil }
            index += 1
            var members: [String: JSONValue] = [:]
            skipSpace()
            if consume(UInt8(ascii: "}")) { return .object(members) }
            while true {
                skipSpace()
                guard let key = jsonString() else { return nil }
                skipSpace()
                guard consume(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard let member = jsonValue(depth: depth + 1) else { return nil }
                // A repeated key: the decoder decides which one counts.
                guard members.updateValue(member, forKey: key) == nil else { return nil }
                skipSpace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "}")) ? .object(members) : nil
            }
        case UInt8(ascii: "["):
            guard depth < JSONSyntax.maxDepth else { return nil }
            index += 1
            var elements: [JSONValue] = []
            skipSpace()
            if consume(UInt8(ascii: "]")) { return .array(elements) }
            while true {
                skipSpace()
                guard let element = jsonValue(depth: depth + 1) else { return nil }
                elements.append(element)
                skipSpace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "]")) ? .array(elements) : nil
            }
        case UInt8(ascii: "\""): return jsonString().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return literal("null") ? .null : nil
        default:
            let start = index
            guard number() else { return nil }
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            // `number()` has refused what a Double cannot hold (out of range, vanishing to zero).
            return Double(text).map(JSONValue.number)
        }
    }

    /// A string `string()` accepts, decoded by the scanner's own decoder.
    private mutating func jsonString() -> String? {
        let start = index
        guard string() else { return nil }
        let range = (start + 1)..<(index - 1)
        let escaped = bytes[range].contains(UInt8(ascii: "\\"))
        return Self.decode(bytes, StringRange(start: range.lowerBound, end: range.upperBound, escaped: escaped))
    }
}
