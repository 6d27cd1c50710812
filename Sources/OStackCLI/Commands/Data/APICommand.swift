import Glibc
import ArgumentParser
import OStackCore
import PlatformKit

/// `ostack api [METHOD] PATH` — an authenticated request to the selected account's server, like
/// `gh api` (docs/commands.md, "ostack api").
struct APICommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api", abstract: "Send an authenticated request to the account's server and print the answer.",
        discussion: """
            PATH is relative to the account's API base (`/data/task` is `/api/v1/data/task` on a standard \
            server); a full URL must be on the account's own server. Fields become query parameters of a GET \
            and a JSON object body otherwise; METHOD defaults to GET, or POST when fields or --input are given. \
            The credential is added by ostack and never printed, not even with --verbose.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "GET, POST, PATCH, PUT or DELETE, then the path; or only the path.") var words: [String]
    @Option(
        name: .customShort("f"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("A string field, key=value; repeatable.", valueName: "key=value"))
    var stringFields: [String] = []
    @Option(
        name: .customShort("F"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "A typed field: numbers, true, false and null as JSON, @file for a file's text; repeatable.",
            valueName: "key=value"))
    var typedFields: [String] = []
    @Option(name: .long, help: ArgumentHelp("The request body from a file, or - for stdin.", valueName: "file"))
    var input: String?
    @Option(
        name: .customShort("H"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("An extra header, 'Name: value'; repeatable.", valueName: "header"))
    var headers: [String] = []
    @Flag(name: .long, help: "Follow a list over its pages (top/skip) and print one document of every record.")
    var paginate = false

    func validate() throws {
        guard (1...2).contains(words.count) else { throw ValidationError("Give a path, or a method and a path.") }
        if words.count == 2, !APIRequest.methods.contains(words[0].uppercased()) {
            throw ValidationError("'\(words[0])' is not an HTTP method (GET, POST, PATCH, PUT, DELETE).")
        }
        if input != nil && !(stringFields.isEmpty && typedFields.isEmpty) {
            throw ValidationError("Pass fields or --input, not both.")
        }
        // The server's JSON is printed as it came: no table, tsv or csv of it.
        if let format = global.format, format != .json {
            throw ValidationError(
                "ostack api prints the server's JSON: --format \(format) does not apply (--jq picks values).")
        }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let session = try context.selectedSession()
            let routes = session.api.directory.discovery.routes
            var request = try APIRequest(words: words, server: session.account.server, base: routes.base)
            // The sign-in routes answer with credentials (get-session carries the session token):
            // ostack keeps those to itself (login, logout and auth refresh use them).
            // (Compared without case: a server may route `/AUTH/…` as `/auth/…`.)
            let path = request.path.lowercased()
            let auth = routes.auth.lowercased()
            if path == auth || path.hasPrefix(auth + "/") {
                throw OStackError(
                    .invalidInput,
                    context: .init(
                        suggestion: .text(
                            "ostack api does not call the sign-in routes (their answers carry credentials); use "
                                + "ostack login, logout or auth refresh.")),
                    detail: "api: auth route")
            }
            try request.add(headers: headers)
            let fields = try APIRequest.fields(strings: stringFields, typed: typedFields)
            if let input {
                request.body = try APIRequest.read(input)
                if words.count == 1 { request.method = "POST" }
            } else if !fields.isEmpty {
                if words.count == 1 { request.method = "POST" }
                if request.method == "GET" || request.method == "DELETE" {
                    request.query += fields.map { ($0.key, RecordText.text($0.value)) }
                } else {
                    request.body = JSONValue.object(Dictionary(fields, uniquingKeysWith: { _, last in last }))
                        .serialized()
                }
            }
            if paginate {
                guard request.method == "GET" else {
                    throw OStackError(
                        .invalidInput, context: .init(suggestion: "--paginate follows GET lists only."),
                        detail: "paginate method")
                }
                try Self.paginate(request, session: session, context: context)
                return
            }
            let outcome = try Self.send(request, session: session, context: context)
            Self.printBody(outcome.response.body, context: context)
            guard outcome.ok else {
                throw outcome.error.asOStackError(
                    account: session.account.alias, host: session.account.server.authority)
            }
        }
    }

    static func send(_ request: APIRequest, session: AccountSession, context: CommandContext) throws(OStackError)
        -> DataAPI.Outcome
    {
        let path = request.pathWithQuery
        if context.global.verbose {
            context.terminal.err("> \(request.method) \(ErrorPresenter.sanitize(path, maxLength: 500))\n")
            context.terminal.err("> Authorization: (the account's credential, not shown)\n")
            for (name, value) in request.headers {
                context.terminal.err(
                    "> \(ErrorPresenter.sanitize(name, maxLength: 100)): \(ErrorPresenter.sanitize(value, maxLength: 300))\n"
                )
            }
        }
        let outcome = try session.api.raw(
            method: request.method, path: path, headers: request.headers, body: request.body)
        if context.global.verbose {
            context.terminal.err("< HTTP \(outcome.response.status)\n")
            for (name, value) in outcome.response.headers {
                let secret = ["set-cookie", "set-auth-token", "authorization"].contains(name.lowercased())
                context.terminal.err(
                    "< \(ErrorPresenter.sanitize(name, maxLength: 100)): "
                        + (secret ? "(not shown)" : ErrorPresenter.sanitize(value, maxLength: 300)) + "\n")
            }
        }
        return outcome
    }

    /// JSON is printed re-encoded (control characters escaped); anything else as it came when stdout
    /// is not a terminal, sanitised when it is.
    static func printBody(_ body: [UInt8], context: CommandContext) {
        if body.isEmpty { return }
        if let json = JSONValue.parse(body) {
            context.terminal.out(JSONOutput.encode(json) + "\n")
        } else if context.terminal.stdoutIsTerminal {
            context.terminal.out(OutputFilter.sanitizeKeepingLines(String(decoding: body, as: UTF8.self)) + "\n")
        } else {
            context.terminal.out(String(decoding: body, as: UTF8.self))
        }
    }

    /// `top`/`skip` pages until a short page, `hasMore: false` or the `total`; one document
    /// `{"records":[…],"total":n}`, written as the pages come (memory stays flat however many there
    /// are). A page the server sent before (the last one or any earlier) stops with an error.
    static func paginate(_ request: APIRequest, session: AccountSession, context: CommandContext) throws(OStackError) {
        let pageSize = request.query.last { $0.0 == "top" }.flatMap { Int($0.1) } ?? 200
        guard pageSize > 0 else {
            throw OStackError(
                .invalidInput, context: .init(suggestion: "--paginate needs a page size (top) above 0."),
                detail: "paginate top")
        }
        let host = session.account.server.authority
        var base = request
        base.query.removeAll { $0.0 == "top" || $0.0 == "skip" }
        var count = 0
        var seen = SeenPages()
        // A failure after the first records ends the partial document's line; before them, the
        // server's answer is printed as for any request.
        func failing(_ body: [UInt8]) {
            if count > 0 { context.terminal.out("\n") } else { printBody(body, context: context) }
        }
        for page in 0..<100_000 {
            var next = base
            next.query += [("top", String(pageSize)), ("skip", String(page * pageSize))]
            let outcome = try send(next, session: session, context: context)
            guard outcome.ok else {
                failing(outcome.response.body)
                throw outcome.error.asOStackError(account: session.account.alias, host: host)
            }
            let json = JSONValue.parse(outcome.response.body)
            guard let items = (json?["records"] ?? json?["data"]?["records"] ?? json?["data"])?.arrayValue else {
                failing([])
                throw OStackError(.unexpectedResponse, context: .init(host: host), detail: "paginate: no records")
            }
            let ids = items.map { $0["id"]?.stringValue ?? String(decoding: $0.serialized(), as: UTF8.self) }
            if !items.isEmpty, !seen.insert(ids) {
                failing([])
                throw OStackError(.unexpectedResponse, context: .init(host: host), detail: "paginate: page repeated")
            }
            for item in items {
                context.terminal.out((count == 0 ? #"{"records":["# : ",") + JSONOutput.encode(item))
                count += 1
            }
            let total = json?["total"]?.intValue
            if items.count < pageSize || json?["hasMore"]?.boolValue == false || total.map({ count >= $0 }) == true {
                break
            }
        }
        context.terminal.out((count == 0 ? #"{"records":["# : "") + #"],"total":\#(count)}"# + "\n")
    }
}

/// A request of `ostack api`, checked: the method, a path on the account's own server, headers that
/// do not touch the credentials.
struct APIRequest {
    static let methods: Set<String> = ["GET", "POST", "PATCH", "PUT", "DELETE"]
    var method: String
    var path: String
    var query: [(String, String)] = []
    var headers: [(String, String)] = []
    var body: [UInt8]?

    init(words: [String], server: ServerURL, base: String) throws(OStackError) {
        method = words.count == 2 ? words[0].uppercased() : "GET"
        var target = words.last!
        // A full URL starts with a scheme (`https://…`); `://` later on (in a query) is part of a path.
        let scheme = target.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
        if !scheme.isEmpty, target.dropFirst(scheme.count).hasPrefix("://") {
            // A full URL only on the account's own server (its scheme, host, port and path prefix).
            let own = server.absoluteString
            guard target.hasPrefix(own), let next = target.dropFirst(own.count).first, next == "/" || next == "?"
            else {
                throw OStackError(
                    .invalidInput,
                    context: .init(
                        suggestion: .text(
                            "ostack api sends the account's credentials only to its own server (\(server.authority)); "
                                + "give a path such as /data/task.")),
                    detail: "api: another origin")
            }
            target = String(target.dropFirst(own.count))
        } else {
            if !target.hasPrefix("/") { target = "/" + target }
            if !(target == base || target.hasPrefix(base + "/") || target.hasPrefix(base + "?")) {
                target = base + target
            }
        }
        var pathPart = Substring(target)
        if let mark = target.firstIndex(of: "?") {
            pathPart = target[..<mark]
            for pair in target[target.index(after: mark)...].split(separator: "&") where !pair.isEmpty {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                query.append((Self.decode(String(parts[0])), parts.count > 1 ? Self.decode(String(parts[1])) : ""))
            }
        }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/%:@!$'()*+,;=")
        guard pathPart.allSatisfy({ allowed.contains($0) }), let canonical = Self.canonicalPath(pathPart) else {
            throw OStackError(
                .invalidInput,
                context: .init(
                    suggestion: "The path has characters a URL path cannot hold, `..`, or an encoded / or \\."),
                detail: "api: bad path")
        }
        path = canonical
    }

    /// The path as the server routes it, so that what is checked (the sign-in routes are refused) is
    /// what is sent: `%XX` of a letter, digit or `-._~` decoded (RFC 3986 §6.2.2.2: the same path),
    /// other escapes upper-cased, empty segments (`//`) dropped. Nil for a `.` or `..` segment (also
    /// encoded), an encoded `/` or `\\`, or a `%` not followed by two hex digits.
    static func canonicalPath(_ path: Substring) -> String? {
        let bytes = Array(path.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        let digits = Array("0123456789ABCDEF".utf8)
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "%") else {
                decoded.append(byte)
                index += 1
                continue
            }
            guard index + 2 < bytes.count, let high = Hex.nibble(bytes[index + 1]),
                let low = Hex.nibble(bytes[index + 2])
            else {
                return nil
            }
            let value = high << 4 | low
            if value == UInt8(ascii: "/") || value == UInt8(ascii: "\\") { return nil }
            let unreserved =
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(value)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(value)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(value) || "-._~".utf8.contains(value)
            if unreserved {
                decoded.append(value)
            } else {
                decoded += [UInt8(ascii: "%"), digits[Int(value >> 4)], digits[Int(value & 0xF)]]
            }
            index += 3
        }
        let segments = String(decoding: decoded, as: UTF8.self).split(separator: "/")
        guard !segments.contains(where: { $0 == ".." || $0 == "." }) else { return nil }
        return "/" + segments.joined(separator: "/")
    }

    var pathWithQuery: String {
        query.isEmpty
            ? path
            : path + "?"
                + query.map { "\(DataAPI.percentEncode($0.0))=\(DataAPI.percentEncode($0.1))" }.joined(separator: "&")
    }

    /// `-H 'Name: value'`; the credentials and the framing headers are ostack's.
    mutating func add(headers lines: [String]) throws(OStackError) {
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: "A header is 'Name: value'."), detail: "header")
            }
            let name = String(line[..<colon]).trimmingWhitespace()
            let value = String(line[line.index(after: colon)...]).trimmingWhitespace()
            let reserved = ["authorization", "cookie", "host", "content-length", "transfer-encoding"]
            let shown = ErrorPresenter.sanitize(name, maxLength: 60)
            let why: String? =
                !name.isEmpty && !name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") })
                ? "Header '\(shown)' is not a valid header name (letters, digits and '-')."
                : name.isEmpty
                    ? "-H takes 'Name: value'."
                    : value.contains(where: { $0.isNewline || $0 == "\r" })
                        ? "The value of header '\(shown)' cannot contain a line break."
                        : reserved.contains(name.lowercased())
                            ? "Header '\(shown)' cannot be set: ostack sets the credentials and the framing itself."
                            : nil
            if let why {
                throw OStackError(.invalidInput, context: .init(suggestion: .text(why)), detail: "header")
            }
            headers.append((name, value))
        }
    }

    /// `-f` fields as strings; `-F` fields typed (JSON literals) or read from a file (`@path`).
    static func fields(strings: [String], typed: [String]) throws(OStackError) -> [(key: String, value: JSONValue)] {
        var result: [(key: String, value: JSONValue)] = []
        func split(_ text: String) throws(OStackError) -> (String, String) {
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                throw OStackError(.invalidInput, context: .init(suggestion: "A field is key=value."), detail: "field")
            }
            return (String(text[..<equals]), String(text[text.index(after: equals)...]))
        }
        for text in strings {
            let (key, value) = try split(text)
            result.append((key, .string(value)))
        }
        for text in typed {
            let (key, value) = try split(text)
            if value.hasPrefix("@") {
                result.append((key, .string(String(decoding: try read(String(value.dropFirst())), as: UTF8.self))))
            } else if ["true", "false", "null"].contains(value) || Double(value) != nil,
                let literal = JSONValue.parse(Array("[\(value)]".utf8))?.arrayValue?.first
            {
                result.append((key, literal))
            } else {
                result.append((key, .string(value)))
            }
        }
        return result
    }

    /// A file's bytes, or stdin's for `-`.
    static func read(_ source: String) throws(OStackError) -> [UInt8] {
        if source == "-" {
            return try StandardInput.readAllOnce()
        }
        return try readFile(source)
    }

    /// An input file the user names, read whole: at most `fileLimit` bytes (a larger file, or a
    /// device that never ends such as /dev/zero, grew memory until the process was killed).
    static func readFile(_ path: String) throws(OStackError) -> [UInt8] {
        let name = ErrorPresenter.sanitize(path, maxLength: 200)
        do {
            if let bytes = try SecureFileSystem.readFile(path, followLinks: true, limit: fileLimit) { return bytes }
        } catch where error.errno == EFBIG {
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "\(name) is larger than \(fileLimit >> 20) MiB, which ostack reads at most."),
                detail: "input file too large")
        } catch {}
        throw OStackError(.invalidInput, context: .init(suggestion: "Could not read \(name)."), detail: "input file")
    }

    /// The most an input file may hold (`--data @FILE`, `--input FILE`, `records import FILE`).
    static let fileLimit = 256 << 20

    static func decode(_ text: String) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
