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
}
