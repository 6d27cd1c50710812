import FoundationEssentials
import SodiumKit
import Testing

@testable import OStackCore

/// Issue 14, defect 3: nothing a server sends may trap. Every decoder of server input is fed
/// 10 000 mutated bodies: realistic seeds with hostile values put into the tree (huge, negative,
/// fractional and non-finite-looking numbers, wrong types, escape sequences, deep nesting, long
/// strings) and byte-level damage. A trap ends the test process, so finishing is the assertion;
/// each decoder also has to answer something sensible for the unmutated seed. Seeded, so a failure
/// reproduces.
@Suite struct WireFuzzTests {
    static let rounds = 10_000

    /// SplitMix64: small, seedable, good enough to drive mutations.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let hostileNumbers: [String] = [
        "1e19", "-1e19", "1e308", "-5", "2.5", "0", "-0", "9223372036854775807", "9223372036854775808", "1e-320",
        "4294967296", "-2147483649", "1e400", "NaN", "Infinity",
    ]
    static let hostileStrings: [String] = [
        "\u{1B}]0;pwned\u{07}x", "\u{9B}31m", "\u{202E}evil", "", String(repeating: "A", count: 4_000), "\u{0}",
        "../../etc/passwd", "CALL 1-800-555-0100",
    ]

    static func hostileValue(_ generator: inout Generator) -> JSONValue {
        switch Int.random(in: 0..<8, using: &generator) {
        case 0: return .number([1e19, -1e19, 1e308, -5, 2.5, 0, 4_294_967_296, -1].randomElement(using: &generator)!)
        case 1: return .string(hostileStrings.randomElement(using: &generator)!)
        case 2: return .null
        case 3: return .bool(Bool.random(using: &generator))
        case 4: return .array([])
        case 5: return .object([:])
        case 6:
            var nested: JSONValue = .null
            for _ in 0..<Int.random(in: 10...80, using: &generator) { nested = .array([nested]) }
            return nested
        default: return .array((0..<Int.random(in: 0...5, using: &generator)).map { _ in .number(-1) })
        }
    }

    /// The seed with one node replaced by a hostile value (a tree mutation).
    static func mutateTree(_ value: JSONValue, _ generator: inout Generator, depth: Int = 0) -> JSONValue {
        if depth > 0 && Int.random(in: 0..<4, using: &generator) == 0 { return hostileValue(&generator) }
        switch value {
        case .object(var members) where !members.isEmpty:
            let key = members.keys.sorted().randomElement(using: &generator)!
            if Int.random(in: 0..<10, using: &generator) == 0 {
                members[key] = nil
            } else {
                members[key] = mutateTree(members[key]!, &generator, depth: depth + 1)
            }
            return .object(members)
        case .array(var items) where !items.isEmpty:
            let index = Int.random(in: 0..<items.count, using: &generator)
            items[index] = mutateTree(items[index], &generator, depth: depth + 1)
            return .array(items)
        default:
            return hostileValue(&generator)
        }
    }

    /// Byte damage, and numbers and literals no JSON parser should take quietly.
    static func mutateBytes(_ bytes: [UInt8], _ generator: inout Generator) -> [UInt8] {
        var text = String(decoding: bytes, as: UTF8.self)
        if Bool.random(using: &generator), let digit = text.firstIndex(where: \.isNumber) {
            text.replaceSubrange(digit...digit, with: hostileNumbers.randomElement(using: &generator)!)
        }
        var result = Array(text.utf8)
        for _ in 0..<Int.random(in: 0...3, using: &generator) where !result.isEmpty {
            let index = Int.random(in: 0..<result.count, using: &generator)
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: result[index] = UInt8.random(in: 0...255, using: &generator)
            case 1: result.remove(at: index)
            case 2: result.insert(Array(#"{}[]",:-e"#.utf8).randomElement(using: &generator)!, at: index)
            default: result = Array(result.prefix(index))  // truncated
            }
        }
        return result
    }

    /// A plain serialiser (JSONEncoder is slow in debug builds and these bodies are many).
    static func serialize(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        func string(_ text: String) {
            out.append(UInt8(ascii: "\""))
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += Array(#"\""#.utf8)
                case "\\": out += Array(#"\\"#.utf8)
                case _ where scalar.value < 0x20:
                    out += Array("\\u00".utf8) + Array(String(scalar.value, radix: 16).leftPadded(to: 2).utf8)
                default: out += Array(String(scalar).utf8)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
        func write(_ value: JSONValue) {
            switch value {
            case .null: out += Array("null".utf8)
            case .bool(let flag): out += Array((flag ? "true" : "false").utf8)
            case .number(let number):
                out += Array(
                    (number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : "\(number)").utf8)
            case .string(let text): string(text)
            case .array(let items):
                out.append(UInt8(ascii: "["))
                for (index, item) in items.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    write(item)
                }
                out.append(UInt8(ascii: "]"))
            case .object(let members):
                out.append(UInt8(ascii: "{"))
                for (index, key) in members.keys.sorted().enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    string(key)
                    out.append(UInt8(ascii: ":"))
                    write(members[key]!)
                }
                out.append(UInt8(ascii: "}"))
            }
        }
        write(value)
        return out
    }

    /// `rounds` mutated versions of `seeds`, half tree-level, half byte-level.
    static func bodies(_ seeds: [String], seed: UInt64) -> [[UInt8]] {
        var generator = Generator(state: seed)
        let parsed = seeds.map { JSONValue.parse(Array($0.utf8))! }
        return (0..<rounds).map { round in
            let base = parsed[round % parsed.count]
            let tree = serialize(mutateTree(base, &generator))
            return Bool.random(using: &generator) ? tree : mutateBytes(tree, &generator)
        }
    }

    static let listSeeds = [
        #"{"records":[{"id":"r1","title":"a","amount":10.5,"updated_at":"2026-01-01T00:00:00.000Z"},{"id":"r2","updated_at":"2026-01-02T00:00:00.000Z","tags":["x"]}],"total":2,"hasMore":false}"#,
        #"{"records":[],"total":0}"#,
    ]

    @Test func listPagesAndRecords() {
        #expect(Puller.parsePage(Array(Self.listSeeds[0].utf8))?.records.count == 2)
        let scanner = FieldScanner(fields: ["id", "updated_at", "amount", "title"])
        for body in Self.bodies(Self.listSeeds, seed: 1) {
            _ = Puller.parsePage(body)
            body.withUnsafeBytes { raw in
                if let found = FieldScanner.recordRanges(in: raw) {
                    for range in found.ranges {
                        let slice = UnsafeRawBufferPointer(rebasing: raw[range])
                        _ = scanner.scan(slice)
                        _ = JSONSyntax.isValidObject(slice)
                    }
                }
            }
            if let json = JSONValue.parse(body) {
                for record in json["records"]?.arrayValue ?? [] {
                    _ = record["amount"]?.intValue
                    _ = PushClassifier.recordID(record)
                }
            }
        }
    }

    static let metadataSeeds = [
        #"{"name":"task","label":"Task","nameField":"title","fields":{"title":{"type":"text","label":"Title","required":true,"maxLength":200,"minLength":1},"amount":{"type":"currency","scale":2,"min":0,"max":1000000},"status":{"type":"select","options":[{"value":"open","label":"Open"}]}}}"#,
        #"{"name":"note","label":{"en":"Note","de":"Notiz"},"fields":[{"name":"body","type":"textarea","maxLength":5000}]}"#,
    ]

    @Test func metadata() {
        #expect(ObjectSchema(item: JSONValue.parse(Array(Self.metadataSeeds[0].utf8))!) != nil)
        for body in Self.bodies(Self.metadataSeeds, seed: 2) {
            guard let json = JSONValue.parse(body), let schema = ObjectSchema(item: json) else { continue }
            let validator = FieldValidator(schema: schema)
            try? validator.validate(["title": .string("x"), "amount": .number(1e19)], complete: true)
        }
    }

    static let errorSeeds = [
        #"{"code":"VALIDATION_FAILED","error":"bad","fields":[{"field":"title","message":"x"}],"index":3,"max":50}"#,
        #"{"error":{"code":"CONCURRENT_UPDATE","details":{"fields":[{"field":"a"}]}},"currentVersion":"v2","currentRecord":{"id":"r1"}}"#,
    ]

    static let batchSeeds = [
        #"{"records":[{"id":"a"},{"id":"b"}],"count":2}"#,
        #"{"success":false,"results":[{"id":"a","success":true,"index":0},{"id":"b","success":false,"index":1,"errors":[{"code":"CONCURRENT_UPDATE","httpStatus":409,"currentVersion":"v"}]}]}"#,
        #"{"object":"task","id":"a","record":{"id":"a","updated_at":"v2"}}"#,
    ]
    static let statuses = [200, 201, 400, 409, 422, 429, 500, 503, 418]

    @Test func errors() {
        var generator = Generator(state: 3)
        for (index, body) in Self.bodies(Self.errorSeeds, seed: 4).enumerated() {
            let status = Self.statuses[index % Self.statuses.count]
            let response = TransportResponse(
                status: status, headers: [("Retry-After", Self.hostileNumbers.randomElement(using: &generator)!)],
                body: body)
            let error = ServerError(response: response)
            _ = error.asOStackError(account: "a", host: "h")
            _ = PushClassifier.classify(
                status: status, body: JSONValue.parse(body), retryAfter: error.retryAfterSeconds, operation: .update,
                ids: ["a"])
        }
    }

    @Test func batches() {
        for (index, body) in Self.bodies(Self.batchSeeds, seed: 5).enumerated() {
            let status = Self.statuses[index % Self.statuses.count]
            let json = JSONValue.parse(body)
            for operation in [QueueEntry.Operation.create, .update, .delete] {
                _ = PushClassifier.classify(
                    status: status, body: json, retryAfter: nil, operation: operation, ids: ["a", "b"])
                _ = PushClassifier.classify(
                    status: status, body: json, retryAfter: nil, operation: operation, ids: ["a"])
                for row in json?["results"]?.arrayValue ?? [] {
                    _ = PushClassifier.classifyRow(row, id: "a", operation: operation)
                }
            }
        }
    }

    @Test func discovery() {
        let seeds = [
            #"{"name":"ObjectStack API","version":"1.0","routes":{"data":"/api/v1/data","metadata":"/api/v1/meta","auth":"/api/v1/auth"},"capabilities":{"conditionalBatch":{"enabled":true}}}"#
        ]
        #expect(ServerRoutes(discovery: JSONValue.parse(Array(seeds[0].utf8))).data == "/api/v1/data")
        for body in Self.bodies(seeds, seed: 6) { _ = ServerRoutes(discovery: JSONValue.parse(body)) }
    }

    /// A transport answering every request with one body.
    struct Canned: HTTPTransport {
        var status: Int
        var body: [UInt8]
        func send(_ request: TransportRequest) throws(TransportFailure) -> TransportResponse {
            TransportResponse(
                status: status, headers: [("set-auth-token", "tok_\u{1B}[2J"), ("Content-Type", "application/json")],
                body: body)
        }
    }

    @Test func sessionsAndSignIn() throws {
        let sessionSeeds = [
            #"{"session":{"token":"tok_1","expiresAt":"2026-12-01T00:00:00.000Z","id":"s1"},"user":{"id":"usr_alice","email":"a@example.com","name":"Alice"}}"#
        ]
        let signInSeeds = [
            #"{"token":"tok_1","user":{"id":"usr_alice","email":"a@example.com","name":"Alice"}}"#,
            #"{"twoFactorRedirect":true,"twoFactorMethods":["totp","otp"]}"#,
        ]
        let server = try ServerURL(parsing: "http://127.0.0.1:9", allowInsecureHTTP: true)
        let token = SessionCredential(SecretBytes(copying: Array("tok_1".utf8)))
        let seeded = AuthAPI(server: server, transport: Canned(status: 200, body: Array(sessionSeeds[0].utf8)))
        #expect(try seeded.getSession(token: token)?.user.id == "usr_alice")
        for body in Self.bodies(sessionSeeds, seed: 7) {
            let api = AuthAPI(server: server, transport: Canned(status: 200, body: body))
            _ = try? api.getSession(token: token)
        }
        for body in Self.bodies(signInSeeds, seed: 8) {
            let api = AuthAPI(server: server, transport: Canned(status: 200, body: body))
            _ = try? api.signIn(email: "a@example.com", password: SecretBytes(copying: Array("pw".utf8)))
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
