import FoundationEssentials
@testable import OStackCore
import OStackTestSupport
import Testing

@Suite struct JSONValueTests {
    /// What `serialized()` must equal, byte for byte: stored records, queue payloads and request
    /// bodies were written this way before the direct writer, and are compared as written.
    static func reference(_ value: JSONValue) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? Array(encoder.encode(value))) ?? Array("null".utf8)
    }

    static let keys = [
        "a", "B", "b", "a_b", "aB", "a10", "a9", "A", "_x", "x-y", "1", "10", "2", "id", "ID", "é", "ß", "Z", "z",
        "a b",
        "\"q\"", "back\\slash", "new\nline",
    ]
    static let strings = [
        "", "plain", "with \"quotes\"", "back\\slash", "a/b", "tab\there", "nul\u{0}x", "bell\u{7}", "del\u{7F}",
        "é", "日本語", "emoji 🙂", "line\u{2028}sep", "\u{202E}rtl", "\u{1B}[31mred", "\r\n", "unit\u{1F}x",
    ]
    static let numbers: [Double] = [
        0, -0.0, 1, -1, 42, 2.5, -3.25, 1e15, 8.9e15, 9e15, 1e20, -1e20, 0.1, 1e-7, 123_456_789, .pi,
        Double(Int64(1) << 53), 1.5e300,
    ]

    static func random(_ generator: inout SeededGenerator, depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .number(numbers.randomElement(using: &generator)!)
        case 3: return .string(strings.randomElement(using: &generator)!)
        case 4:
            return .array(
                (0..<Int.random(in: 0...4, using: &generator)).map { _ in random(&generator, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                members[keys.randomElement(using: &generator)!] = random(&generator, depth: depth + 1)
            }
            return .object(members)
        }
    }

    @Test func serializedIsWhatJSONEncoderWrites() {
        var generator = SeededGenerator(seed: 20_261_124)
        var direct = 0
        for _ in 0..<5000 {
            let value = Self.random(&generator)
            var bytes: [UInt8] = []
            if value.writeDirectly(into: &bytes) { direct += 1 }
            #expect(
                value.serialized() == Self.reference(value),
                "\(String(decoding: value.serialized(), as: UTF8.self)) vs \(String(decoding: Self.reference(value), as: UTF8.self))"
            )
        }
        #expect(direct > 1000, "the direct writer was taken for \(direct) of 5000 values")
    }

    @Test func aTypicalRecordIsWrittenDirectly() {
        let record: JSONValue = [
            "id": "tsk_1", "title": "Quote \" and \\ and / ok", "amount": 12, "done": false, "owner": .null,
            "tags": ["a", "b"], "notes": "é 日本",
        ]
        #expect(
            String(decoding: record.serialized(), as: UTF8.self)
                == #"{"amount":12,"done":false,"id":"tsk_1","notes":"é 日本","owner":null,"tags":["a","b"],"title":"Quote \" and \\ and / ok"}"#
        )
        #expect(record.serialized() == Self.reference(record))
        var direct: [UInt8] = []
        #expect(record.writeDirectly(into: &direct))
        // Control characters, non-ASCII keys and fractions are left to JSONEncoder.
        for other: JSONValue in [["a": "x\u{1}"], ["é": 1], ["a": .number(2.5)]] {
            var bytes: [UInt8] = []
            #expect(!other.writeDirectly(into: &bytes))
        }
    }

    /// Equal to the bit: numbers by their bit pattern (so -0 differs from 0), strings by their UTF-8
    /// bytes (so composed and decomposed forms differ), object keys likewise.
    static func identical(_ left: JSONValue?, _ right: JSONValue?) -> Bool {
        switch (left, right) {
        case (nil, nil): return true
        case (.null?, .null?): return true
        case (.bool(let a)?, .bool(let b)?): return a == b
        case (.number(let a)?, .number(let b)?): return a.bitPattern == b.bitPattern
        case (.string(let a)?, .string(let b)?): return Array(a.utf8) == Array(b.utf8)
        case (.array(let a)?, .array(let b)?):
            return a.count == b.count && zip(a, b).allSatisfy { identical($0, $1) }
        case (.object(let a)?, .object(let b)?):
            let keys = { (members: [String: JSONValue]) in
                members.keys.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
            }
            guard keys(a) == keys(b) else { return false }
            return a.allSatisfy { key, value in
                b.first { Array($0.key.utf8) == Array(key.utf8) }.map { identical(value, $0.value) } ?? false
            }
        default: return false
        }
    }

    /// What `parse` must give: `JSONDecoder`'s decoding of `JSONValue` (nil when it refuses).
    static func decoded(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    /// Random JSON text, spelled in the ways servers spell it: whitespace, escapes (`\u` too),
    /// number forms (exponents, fractions, -0, huge), nesting.
    static func randomText(_ generator: inout SeededGenerator, depth: Int = 0) -> String {
        let space = ["", "", " ", "\n", "\t ", "\r\n"]
        func ws() -> String { space.randomElement(using: &generator)! }
        let numbers = [
            "0", "-0", "1", "-1", "42", "2.5", "-3.25", "1e3", "1E+3", "2e-3", "-0.0", "0.1",
            "123456789012345678901234",
            "1e308", "1e309", "-1e400", "1.7976931348623157e308", "5e-324", "1e-400", "9007199254740993", "00", "01",
            "1.", ".5", "-", "1e", "+1", "0x10", "NaN", "Infinity",
        ]
        let strings = [
            "", "plain", "with \\\"quotes\\\"", "a\\/b", "tab\\there", "\\u00e9", "\\ud83d\\ude42", "\\ud83d",
            "é", "日本語", "\\n\\r\\b\\f", "\\x", "raw\ttab", "\\u0000", "\\uZZZZ", "🙂",
        ]
        switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &generator) {
        case 0: return ["null", "true", "false", "nul", "True"].randomElement(using: &generator)!
        case 1, 2: return numbers.randomElement(using: &generator)!
        case 3, 4: return "\"" + strings.randomElement(using: &generator)! + "\""
        case 5:
            let items = (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                ws() + randomText(&generator, depth: depth + 1) + ws()
            }
            return "[" + ws() + items.joined(separator: ",") + "]"
        default:
            let keys = ["a", "b", "id", "é", "a\\u0062", "", "a"]
            let items = (0..<Int.random(in: 0...5, using: &generator)).map { _ in
                ws() + "\"" + keys.randomElement(using: &generator)! + "\"" + ws() + ":" + ws()
                    + randomText(&generator, depth: depth + 1) + ws()
            }
            return "{" + items.joined(separator: ",") + ws() + "}"
        }
    }

    /// Where text that is not JSON goes wrong, by line; nil for JSON (a repeated key included,
    /// which the decoder reads).
    @Test func errorLineNamesWhereTheTextStopsBeingJSON() {
        func line(_ text: String) -> Int? { JSONValue.errorLine(Array(text.utf8)) }
        #expect(line(#"[{"a":1},{"a":2}]"#) == nil)
        #expect(line(#"{"a":1,"a":2}"#) == nil)
        #expect(line("[\n{\"a\":1},\n{\"a\":1e400}\n]") == 3)
        #expect(line("[\n1,\n2\n3]") == 4)
        #expect(line("[1,\n2,\n") == 3)
        #expect(line("") == 1)
        #expect(line("{\"a\": tru}") == 1)
        // A raw line break inside a string is the error, on the line where it is (not the next one).
        #expect(line("[\n\"a\nb\"\n]") == 2)
        #expect(line("[\n{\"title\":\"one\ntwo\"}\n]") == 2)
        #expect(line("[\"tab\there\"]") == 1)
    }

    /// `parse` reads ordinary text itself and hands the rest to `JSONDecoder`: for valid text, broken
    /// text and random byte mutations alike the result is the decoder's, and most ordinary text is
    /// read directly.
    @Test func parseIsWhatJSONDecoderGives() {
        var generator = SeededGenerator(seed: 20_261_125)
        var agreed = 0
        var valid = 0
        for round in 0..<12_000 {
            var bytes = Array(Self.randomText(&generator).utf8)
            if round % 3 == 1, !bytes.isEmpty {
                // A mutation: a byte changed, removed, or the text cut short.
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: bytes[at] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.remove(at: at)
                case 2: bytes = Array(bytes[..<at])
                default:
                    bytes.insert([0x22, 0x5C, 0x2C, 0x7B, 0x5D, 0x00, 0xFF].randomElement(using: &generator)!, at: at)
                }
            }
            if round % 7 == 3 { bytes = Array(" \n".utf8) + bytes + Array("\t".utf8) }
            let expected = Self.decoded(bytes)
            let got = JSONValue.parse(bytes)
            if expected != nil { valid += 1 }
            if Self.identical(got, expected) { agreed += 1 }
            #expect(Self.identical(got, expected), "\(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(agreed == 12_000)
        #expect(valid > 4_000, "only \(valid) valid texts")
    }

    /// Edge cases a random generator rarely makes: subnormal and boundary numbers, -0, nesting past
    /// the direct reader's limit, keys equal as Swift strings but not as bytes (the decoder keeps
    /// the first of a repeated key), a byte-order mark, a NUL.
    @Test func edgeCasesAreWhatJSONDecoderGives() {
        let nested = String(repeating: "[", count: 65) + "1" + String(repeating: "]", count: 65)
        let texts = [
            "5e-324", "4.9e-324", "2.2250738585072011e-308", "2.2250738585072014e-308", "-0", "-0.0", "0e99999",
            "1.7976931348623157e308", "1.7976931348623159e308", "123456789012345678901234567890", "0.30000000000000004",
            nested, "{\"\u{E9}\":1,\"e\u{301}\":2}", #"{"a":1,"a":1e400}"#, "\u{FEFF}[1]", "[1]\u{0}",
            #"["\u0000"]"#, #""\/""#, "[1,]", "{\"a\":1,}", " \n[ ]\t", "\u{7F}", "\"\u{7F}\"", "\"a\u{0}b\"",
        ]
        for text in texts {
            let bytes = Array(text.utf8)
            #expect(Self.identical(JSONValue.parse(bytes), Self.decoded(bytes)), "\(text)")
        }
    }

    /// A typical record and a typical list page are read without `JSONDecoder` (the direct reader
    /// gives the value itself), and values serialized by `serialized()` read back equal.
    @Test func ordinaryTextIsReadDirectlyAndRoundTrips() {
        var generator = SeededGenerator(seed: 7)
        var direct = 0
        for _ in 0..<2_000 {
            let value = Self.random(&generator)
            let text = value.serialized()
            #expect(JSONValue.parse(text) == value)
            #expect(JSONValue.parse(text) == Self.decoded(text))
            if let read = JSONValue.parseDirectly(text) {
                direct += 1
                #expect(read == value)
            }
        }
        // What `serialized()` writes (escapes included) is all read directly.
        #expect(direct == 2_000, "read directly: \(direct) of 2 000")
        let page = Array(
            #"{"records":[{"id":"tsk_1","title":"A \"quoted\" title","amount":12.5,"done":false,"tags":["x"],"owner":null}],"total":1,"hasMore":false}"#
                .utf8)
        #expect(JSONValue.parse(page) == Self.decoded(page))
        #expect(JSONValue.parseDirectly(page) == Self.decoded(page))
        #expect(JSONValue.parse(page)?["records"]?.arrayValue?.first?["title"] == "A \"quoted\" title")
    }

    /// A name given twice in one object is found (decoded: `\u0061` is `a`), in any object at any
    /// depth; the same name in two objects, or as a value, is not a repeat.
    @Test func aRepeatedNameIsFound() {
        let cases: [(String, String?)] = [
            (#"{"a":1,"a":2}"#, "a"),
            (#"{"a":"x","\u0061":2}"#, "a"),
            (#"{"o":{"x":1,"y":[1,2],"x":2}}"#, "x"),
            (#"[{"a":1},{"a":2}]"#, nil),
            (#"{"a":1,"b":{"a":2}}"#, nil),
            (#"{"k":"a","v":"a"}"#, nil),
            (#"{"k":"\",\"k\":","z":1}"#, nil),
            (#"{"a":[1,{"b":1}],"b":2}"#, nil),
            ("not json", nil),
        ]
        for (text, expected) in cases {
            #expect(JSONValue.repeatedName(Array(text.utf8)) == expected, "\(text)")
            let (value, repeated) = JSONValue.parseNamingRepeats(Array(text.utf8))
            #expect(repeated == expected, "\(text)")
            #expect(value == JSONValue.parse(Array(text.utf8)), "\(text)")
        }
    }
}
