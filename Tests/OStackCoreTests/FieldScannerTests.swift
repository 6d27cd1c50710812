@testable import OStackCore
import OStackTestSupport
import Testing

@Suite struct FieldScannerTests {
    func scan(_ json: String, _ fields: [String]) -> [ScalarValue] {
        FieldScanner(fields: fields).scan(Array(json.utf8))
    }

    // MARK: Scalars

    @Test func readsEveryScalarKind() {
        let values = scan(
            #"{"s":"text","n":-12.5e1,"t":true,"f":false,"z":null,"i":42,"e":""}"#, ["s", "n", "t", "f", "z", "i", "e"])
        #expect(values == [.string("text"), .number(-125), .bool(true), .bool(false), .null, .number(42), .string("")])
    }

    @Test(arguments: [
        ("0", 0.0), ("-0", 0.0), ("7", 7.0), ("-3.25", -3.25), ("1e3", 1000.0), ("1E-2", 0.01), ("1.5e+2", 150.0),
        ("123456789012", 123_456_789_012.0), ("0.1", 0.1),
    ])
    func readsNumbers(text: String, expected: Double) {
        #expect(scan("{\"n\":\(text)}", ["n"]) == [.number(expected)])
        #expect(scan("{\"n\":\(text),\"after\":1}", ["n", "after"]) == [.number(expected), .number(1)])
    }

    @Test func valuesComeInTheOrderOfTheRequestedFieldsNotOfTheDocument() {
        #expect(scan(#"{"a":1,"b":2,"c":3}"#, ["c", "a", "b"]) == [.number(3), .number(1), .number(2)])
    }

    @Test func absentKeysAreMissing() {
        #expect(scan(#"{"a":1}"#, ["b", "a", "c"]) == [.missing, .number(1), .missing])
        #expect(scan("{}", ["a"]) == [.missing])
        #expect(FieldScanner(fields: []).scan(Array(#"{"a":1}"#.utf8)) == [])
    }

    @Test func keysThatArePrefixesOfEachOtherAreTold() {
        let json = #"{"ab":1,"a":2,"abc":3,"b":4}"#
        #expect(
            scan(json, ["a", "ab", "abc", "abcd", "bc"]) == [.number(2), .number(1), .number(3), .missing, .missing])
        // Only a longer key in the document: the shorter field is missing, not matched by prefix.
        #expect(scan(#"{"status_code":"x"}"#, ["status"]) == [.missing])
        #expect(scan(#"{"st":"x"}"#, ["status"]) == [.missing])
    }

    @Test func whitespaceAnywhereBetweenTokens() {
        let json = " \n{\t\"a\" :\r\n 1 ,  \"b\"\n:\"x\" , \"c\" : [ 1 , 2 ] ,\"d\":  null  }  "
        #expect(scan(json, ["a", "b", "c", "d"]) == [.number(1), .string("x"), .compound, .null])
    }

    // MARK: Nested values

    @Test func nestedArraysAndObjectsAreCompoundAndSkippedWhole() {
        let json = #"{"a":[1,{"b":"]"},[[]]],"b":{"x":{"y":"}"},"z":[]},"c":"after","d":{}}"#
        #expect(scan(json, ["a", "b", "c", "d"]) == [.compound, .compound, .string("after"), .compound])
    }

    @Test func keysInsideNestedObjectsAreNotTopLevelFields() {
        #expect(scan(#"{"outer":{"b":1,"c":{"b":2}},"b":3}"#, ["b"]) == [.number(3)])
        #expect(scan(#"{"outer":{"b":1},"list":[{"b":2}]}"#, ["b"]) == [.missing])
        #expect(scan(#"{"outer":"\"b\":1","x":0}"#, ["b"]) == [.missing])
    }

    @Test func stringsHoldingStructuralCharactersDoNotConfuseTheScan() {
        let json = #"{"a":"x,\"y\":}{][","b":1,"c":"\\","d":2}"#
        #expect(scan(json, ["a", "b", "c", "d"]) == [.string(#"x,"y":}{]["#), .number(1), .string("\\"), .number(2)])
    }

    // MARK: Escapes

    @Test func simpleEscapesAreDecoded() {
        let json = #"{"s":"a\"b\\c\/d\ne\tf\rg\bh\fi"}"#
        #expect(scan(json, ["s"]) == [.string("a\"b\\c/d\ne\tf\rg\u{8}h\u{C}i")])
    }

    @Test func unicodeEscapesAreDecoded() {
        #expect(scan(#"{"s":"\u00e9\u4E2D\u0041"}"#, ["s"]) == [.string("é中A")])
        #expect(scan(#"{"s":"\u0000x"}"#, ["s"]) == [.string("\u{0}x")])
        // Escapes mixed with raw UTF-8 and plain ASCII on both sides.
        #expect(scan(#"{"s":"ü-\u00fc-ü\n"}"#, ["s"]) == [.string("ü-ü-ü\n")])
    }

    @Test func surrogatePairsBecomeOneScalar() {
        #expect(scan(#"{"s":"\ud83d\ude00"}"#, ["s"]) == [.string("😀")])
        #expect(scan(#"{"s":"a\uD834\uDD1Eb"}"#, ["s"]) == [.string("a𝄞b")])
        #expect(scan(#"{"s":"😀 raw"}"#, ["s"]) == [.string("😀 raw")])
    }

    @Test func escapedKeysMatchTheirDecodedName() {
        #expect(scan(#"{"\u0061":1,"b":2}"#, ["a", "b"]) == [.number(1), .number(2)])
        #expect(scan(#"{"a\"b":1}"#, ["a\"b", "a"]) == [.number(1), .missing])
        #expect(scan(#"{"caf\u00e9":true}"#, ["café"]) == [.bool(true)])
        // An escaped key that decodes to something else is not a match.
        #expect(scan(#"{"\u0062":1}"#, ["a"]) == [.missing])
    }

    // MARK: Not an object

    @Test(arguments: ["", " ", "{", "[1,2]", "1", "\"a\"", "null", "{\"a\"", "{\"a\":", "{a:1}"])
    func nonObjectsAndBrokenInputGiveMissing(text: String) {
        #expect(scan(text, ["a"]) == [.missing])
    }

    @Test func readsUpToTheFirstMalformedMember() {
        // The members before the damage are read; what follows is missing, never a trap.
        #expect(scan(#"{"a":1,"b":2 "c":3}"#, ["a", "b", "c"]) == [.number(1), .number(2), .missing])
        #expect(scan(#"{"a":1,"b":"unterminated}"#, ["a", "b"]) == [.number(1), .missing])
    }

    // MARK: Agreement with the JSON decoder

    /// Canonical serialisations (the only thing the scanner reads in production) scan to the same
    /// scalars the decoder gives.
    @Test func agreesWithTheDecoderOnSerialisedRecords() throws {
        var generator = SeededGenerator(seed: 0x5CA9)
        let alphabet: [String] = [
            "a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1F}", "é", "中", "😀", "𝄞", "{", "}", "[", "]", ",",
            ":", "\u{7F}", "\u{2028}",
        ]
        func string() -> String {
            (0..<Int.random(in: 0...8, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
                .joined()
        }
        func value(depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 1 ? 5 : 7), using: &generator) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &generator))
            case 2: return .number(Double(Int.random(in: -100_000...100_000, using: &generator)))
            case 3:
                return .number(
                    Double(Int.random(in: -1_000_000...1_000_000, using: &generator)) / [10, 100, 1e6, 1e-12]
                        .randomElement(
                            using: &generator)!)
            case 4: return .string(string())
            case 5: return .array((0..<Int.random(in: 0...3, using: &generator)).map { _ in value(depth: depth + 1) })
            default:
                return .object(
                    Dictionary(
                        (0..<Int.random(in: 0...3, using: &generator)).map { _ in (string(), value(depth: depth + 1)) },
                        uniquingKeysWith: { first, _ in first }))
            }
        }
        let names = ["a", "ab", "b", "a b", "\"", "é", "😀", "x\\y", "id"]
        for _ in 0..<1500 {
            var members: [String: JSONValue] = [:]
            for name in names where Bool.random(using: &generator) { members[name] = value(depth: 0) }
            let record = JSONValue.object(members)
            let bytes = record.serialized()
            let fields = names.shuffled(using: &generator)
            let scanned = FieldScanner(fields: fields).scan(bytes)
            let expected = fields.map { ScalarValue(record[$0]) }
            #expect(scanned == expected, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }

    // MARK: List responses

    func ranges(_ body: String) -> (objects: [String], hasMore: Bool?)? {
        let bytes = Array(body.utf8)
        guard let found = bytes.withUnsafeBytes({ FieldScanner.recordRanges(in: $0) }) else { return nil }
        return (found.ranges.map { String(decoding: bytes[$0], as: UTF8.self) }, found.hasMore)
    }

    @Test func findsTheRecordsOfAListResponse() throws {
        let body = #"{"object":"task","records":[{"id":"a","n":{"x":[1,"]"]}},{"id":"b\"}"}],"total":2,"hasMore":true}"#
        let found = try #require(ranges(body))
        #expect(found.objects == [#"{"id":"a","n":{"x":[1,"]"]}}"#, #"{"id":"b\"}"}"#])
        #expect(found.hasMore == true)
    }

    @Test func hasMoreMayComeFirstOrBeAbsent() throws {
        let first = try #require(ranges(#"{"hasMore":false,"records":[{"id":"x"}],"object":"task"}"#))
        #expect(first.objects == [#"{"id":"x"}"#])
        #expect(first.hasMore == false)
        let absent = try #require(ranges(#"{"records":[{"id":"x"},{"id":"y"}]}"#))
        #expect(absent.objects.count == 2)
        #expect(absent.hasMore == nil)
    }

    @Test func emptyRecords() throws {
        let empty = try #require(ranges(#"{"object":"task","records":[],"hasMore":false}"#))
        #expect(empty.objects.isEmpty)
        #expect(empty.hasMore == false)
        let spaced = try #require(ranges("{ \"records\" : [ \n ] , \"hasMore\" : true }"))
        #expect(spaced.objects.isEmpty)
        #expect(spaced.hasMore == true)
    }

    @Test func prettyPrintedResponse() throws {
        let body = """
            {
              "object" : "task",
              "records" : [
                { "id" : "a" } ,
                {
                  "id" : "b"
                }
              ],
              "hasMore" : false
            }
            """
        let found = try #require(ranges(body))
        let expected: [JSONValue?] = [.some(["id": "a"]), .some(["id": "b"])]
        #expect(found.objects.map { JSONValue.parse(Array($0.utf8)) } == expected)
        #expect(found.hasMore == false)
    }

    @Test(arguments: [
        "", "[]", "{}", "null", #"{"object":"task"}"#, #"{"records":{}}"#, #"{"records":[1,2]}"#,
        #"{"records":["a"]}"#, #"{"records":[{"a":1}"#, #"{"records":[{"a":1},]}"#, #"{"records":[{"a":1}] "#,
        #"{"records":[{"a":1}],"hasMore":"yes"}"#, #"{"records":[{"a":1}],"hasMore":null}"#,
        #"{"records":[{"a":1}] "hasMore":true}"#, #"{"records":[{"a":"unterminated}]}"#, #"{"records" [] }"#,
        #"{records:[]}"#,
    ])
    func malformedListResponsesAreNil(body: String) {
        #expect(ranges(body) == nil, "\(body)")
    }

    /// Serialised list responses: every range decodes to the record that was written.
    @Test func rangesRoundTripSerialisedResponses() throws {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<300 {
            let records: [JSONValue] = (0..<Int.random(in: 0...6, using: &generator)).map { index in
                [
                    "id": .string("r\(index)"),
                    "title": .string(["a", "}", "]\"", "é{", ""].randomElement(using: &generator)!),
                    "tags": .array([.string("["), .number(Double(index))]), "nested": ["k": ["deep": .null]],
                ]
            }
            let hasMore = Bool.random(using: &generator)
            let body = JSONValue.object([
                "object": "task", "records": .array(records), "hasMore": .bool(hasMore), "total": 9,
            ])
            .serialized()
            let found = try #require(body.withUnsafeBytes { FieldScanner.recordRanges(in: $0) })
            #expect(found.hasMore == hasMore)
            #expect(found.ranges.map { JSONValue.parse(Array(body[$0])) } == records.map { Optional($0) })
        }
    }

    // MARK: Fuzz

    /// Random bytes and random truncations or corruptions of valid JSON never trap (the scanner reads
    /// raw buffers, so an out-of-bounds read would abort the test process in a debug build).
    @Test func randomInputNeverTraps() {
        var generator = SeededGenerator(seed: 0xF022)
        let valid: [String] = [
            #"{"object":"task","records":[{"id":"a","n":{"x":[1,"]"]}},{"id":"b\"}"}],"total":2,"hasMore":true}"#,
            #"{"a":"\ud83d\ude00\u00e9\n","b":-1.5e+3,"c":true,"d":false,"e":null,"f":[{"a":"}"}],"ab":"x"}"#,
            #"{"\u0061":"\u","b":"\\","c":"\ud83d"}"#,
            #"{"records":[],"hasMore":false}"#,
        ]
        let pieces: [[UInt8]] = [
            "{", "}", "[", "]", "\"", "\\", "\\u", "\\ud83d", ":", ",", "true", "t", "f", "n", "-", "1e", "a", " ",
            "records", "hasMore",
        ]
        .map { Array($0.utf8) }
        let scanner = FieldScanner(fields: ["a", "b", "c", "ab", "records", "hasMore", "é"])
        var scannedSomething = 0
        for round in 0..<5000 {
            var bytes: [UInt8]
            switch round % 4 {
            case 0:
                bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
            case 1:
                let source = Array(valid.randomElement(using: &generator)!.utf8)
                bytes = Array(source.prefix(Int.random(in: 0...source.count, using: &generator)))
            case 2:
                bytes = (0..<Int.random(in: 0...24, using: &generator)).flatMap { _ in
                    pieces.randomElement(using: &generator)!
                }
                if Bool.random(using: &generator) { bytes.insert(UInt8(ascii: "{"), at: 0) }
            default:
                bytes = Array(valid.randomElement(using: &generator)!.utf8)
                for _ in 0..<Int.random(in: 1...4, using: &generator) where !bytes.isEmpty {
                    let position = Int.random(in: 0..<bytes.count, using: &generator)
                    if Bool.random(using: &generator) {
                        bytes[position] = pieces.randomElement(using: &generator)!.first!
                    } else {
                        bytes.remove(at: position)
                    }
                }
            }
            // Exact-size buffers, so any read past the end is out of bounds.
            let values = bytes.withUnsafeBytes { scanner.scan($0) }
            #expect(values.count == scanner.keys.count)
            if values.contains(where: { $0 != .missing }) { scannedSomething += 1 }
            _ = bytes.withUnsafeBytes { FieldScanner.recordRanges(in: $0) }
            // And through the filter evaluator, which is what queries run.
            _ = bytes.withUnsafeBytes { LocalFilter(.compare(field: "a", op: .eq, operand: .value("x"))).matches($0) }
        }
        #expect(scannedSomething > 100)
    }

    /// A truncated response is never mistaken for a complete one.
    @Test func truncatedListResponsesAreNil() {
        let body = Array(#"{"object":"task","records":[{"id":"a","t":"}]"},{"id":"b"}],"hasMore":true}"#.utf8)
        for length in 0..<body.count {
            let prefix = Array(body.prefix(length))
            #expect(prefix.withUnsafeBytes { FieldScanner.recordRanges(in: $0) } == nil, "length \(length)")
        }
        #expect(body.withUnsafeBytes { FieldScanner.recordRanges(in: $0) }?.ranges.count == 2)
    }
}

@Suite struct FieldScannerRawTests {
    func raw(_ json: String, _ fields: [String]) -> (
        values: [FieldScanner.RawValue], text: (FieldScanner.RawValue) -> String?
    ) {
        let bytes = Array(json.utf8)
        var values: [FieldScanner.RawValue] = []
        bytes.withUnsafeBytes { FieldScanner(fields: fields).scanRaw($0, into: &values) }
        return (
            values,
            { value in
                bytes.withUnsafeBytes { raw in
                    switch value {
                    case .number(let range): return String(decoding: raw[range], as: UTF8.self)
                    case .string(let range, let escaped): return FieldScanner.decodeString(raw, range, escaped: escaped)
                    default: return nil
                    }
                }
            }
        )
    }

    @Test func valuesStayWhereTheyAre() {
        let (values, text) = raw(
            #"{"n":-12.5e3,"s":"plain","e":"a\"b\\c\u00e9","t":true,"f":false,"z":null,"o":{"s":"x"},"a":[1]}"#,
            ["s", "e", "n", "t", "f", "z", "o", "a", "missing"])
        #expect(text(values[0]) == "plain")
        guard case .string(_, let plainEscaped) = values[0], case .string(_, let escaped) = values[1] else {
            Issue.record("not strings: \(values)")
            return
        }
        #expect(!plainEscaped && escaped)
        #expect(text(values[1]) == "a\"b\\cé")
        #expect(text(values[2]) == "-12.5e3")
        #expect(Array(values[3...]) == [.bool(true), .bool(false), .null, .compound, .compound, .missing])
    }

    /// Keys in another order than asked (the hint guesses wrong) and repeated scans into one array.
    @Test func keyOrderAndReuseDoNotMatter() {
        var values: [FieldScanner.RawValue] = []
        let scanner = FieldScanner(fields: ["a", "b", "c"])
        for json in [#"{"c":3,"b":2,"a":1}"#, #"{"a":1,"c":3}"#, #"{"b":2}"#, "{}", "not json", ""] {
            let bytes = Array(json.utf8)
            bytes.withUnsafeBytes { scanner.scanRaw($0, into: &values) }
            let numbers = values.map { value -> String? in
                guard case .number(let range) = value else { return nil }
                return String(decoding: bytes[range], as: UTF8.self)
            }
            #expect(values.count == 3)
            let expected = [("a", "1"), ("b", "2"), ("c", "3")].map { key, number in
                json.contains("\"\(key)\"") ? number : nil
            }
            #expect(numbers == expected, "\(json)")
        }
    }
}
