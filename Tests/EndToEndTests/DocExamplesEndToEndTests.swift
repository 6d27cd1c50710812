import Glibc
import OStackTestSupport
import Testing

/// Every `ostack` command shown in the README and in `docs/` runs against the dev server (issue 16:
/// an example can never rot again). Commands are taken from the fenced code blocks (`$ ` prompts,
/// `;`-separated commands, `VAR=value` prefixes and `… | ostack` pipes understood; comments dropped).
/// Each runs in its own fixture — accounts `work` (default) and `staging`, a task record and a
/// conflict — with placeholders filled in: the example servers become the dev server, `ID` and the
/// README's sample ids become the record or conflict they stand for, `~/` a temporary directory. A
/// secret the example would ask for on a terminal is given through the command's `--…-stdin` flag.
@Suite struct DocExamplesEndToEndTests {
    struct Example: Sendable, CustomTestStringConvertible {
        var file: String
        var line: Int
        var text: String
        var environment: [String: String]
        var arguments: [String]
        /// What an `echo '…' |` or `printf '…' |` before the command writes to its stdin.
        var input: String? = nil
        var testDescription: String { "\(file):\(line) \(text)" }
    }

    static let root: String = {
        let file = #filePath
        return String(file[..<file.firstRange(of: "/Tests/")!.lowerBound])
    }()

    static let examples: [Example] = {
        var files = ["README.md"]
        if let listing = try? runProcess(executable: "/usr/bin/find", arguments: [root + "/docs", "-name", "*.md"]) {
            files += listing.stdout.split(separator: "\n").map { String($0.dropFirst(root.count + 1)) }.sorted()
        }
        var found: [Example] = []
        for file in files {
            guard let text = try? String(contentsOfFileLite: root + "/" + file) else { continue }
            var inBlock = false
            var shellBlock = false
            for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(raw).trimmedSpaces()
                if line.hasPrefix("```") {
                    inBlock.toggle()
                    shellBlock = inBlock && ["sh", "bash", "shell", "console"].contains(String(line.dropFirst(3)))
                    continue
                }
                // A shell block holds commands; any other block only its `$ `-prompted lines.
                guard inBlock, shellBlock || line.hasPrefix("$ ") else { continue }
                var command = line.hasPrefix("$ ") ? String(line.dropFirst(2)) : line
                command = stripComment(command)
                for segment in split(command, on: ";") {
                    guard let example = parse(segment.trimmedSpaces(), file: file, line: index + 1)
                    else { continue }
                    found.append(example)
                }
            }
        }
        return found
    }()

    /// `text` without a trailing `# comment` (a `#` after whitespace, outside quotes).
    static func stripComment(_ text: String) -> String {
        var quote: Character?
        var previous: Character = " "
        for (offset, character) in text.enumerated() {
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == "#" && previous == " " {
                return String(text.prefix(offset)).trimmedSpaces()
            }
            previous = character
        }
        return text
    }

    /// `text` split at `separator` outside quotes.
    static func split(_ text: String, on separator: Character) -> [String] {
        var parts: [String] = []
        var current = ""
        var quote: Character?
        for character in text {
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == separator {
                parts.append(current)
                current = ""
                continue
            }
            current.append(character)
        }
        parts.append(current)
        return parts
    }

    /// Shell words: quotes removed, no expansion.
    static func words(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
            } else if character == " " {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }

    /// An `ostack` command line (after `VAR=value` prefixes or a pipe into it), else nil.
    static func parse(_ segment: String, file: String, line: Int) -> Example? {
        // The ostack command of a pipeline (`… | ostack …` or `ostack … | cut …`), without redirections.
        let pipeParts = split(segment, on: "|").map { $0.trimmedSpaces() }
        let position = pipeParts.firstIndex { part in words(part).contains("ostack") } ?? pipeParts.count - 1
        let command = pipeParts[position]
        var input: String?
        if position > 0 {
            let feeder = words(pipeParts[position - 1])
            if feeder.first == "echo" { input = feeder.dropFirst().joined(separator: " ") + "\n" }
            if feeder.first == "printf", feeder.count > 1 { input = feeder[1].replacing("\\n", with: "\n") }
        }
        var tokens: [String] = []
        var skipNext = false
        for token in words(command) {
            if skipNext {
                skipNext = false
            } else if [">", ">>", "2>", "<"].contains(token) {
                skipNext = true
            } else if !(token.hasPrefix(">") || token.hasPrefix("2>")) {
                tokens.append(token)
            }
        }
        var environment: [String: String] = [:]
        while let first = tokens.first, first != "ostack", let equals = first.firstIndex(of: "="),
            first[..<equals].allSatisfy({ $0.isUppercase || $0 == "_" })
        {
            environment[String(first[..<equals])] = String(first[first.index(after: equals)...])
            tokens.removeFirst()
        }
        guard tokens.first == "ostack", tokens.count > 1 else { return nil }
        return Example(
            file: file, line: line, text: segment, environment: environment, arguments: Array(tokens.dropFirst()),
            input: input)
    }

    /// Signed in as `work` (alice, the default) and `staging` (bob), with a task record on `work`,
    /// and a conflict when the example is about conflicts (otherwise it would make `sync` exit 6).
    struct Fixture {
        let server: DevServerProcess
        let ostack = OStackRunner()
        let scratch = TemporaryDirectory()
        var record = ""
        var conflict = ""

        init(conflict wanted: Bool) throws {
            server = try DevServerProcess()
            try #require(mkdir(scratch.path + "/backup", 0o700) == 0)
            for (email, password, alias) in [
                ("bob@example.com", "bob-pass", "staging"), ("alice@example.com", "alice-pass", "work"),
            ] {
                let login = try ostack.login(server.url, email, password, extra: ["--alias", alias])
                try #require(login.status == 0, "\(login.stderr)")
            }
            try #require(try ostack.run(["switch", "work"]).status == 0)
            record = try Self.id(in: ostack.run(["records", "create", "task", "--set", "title=Doc", "--json"]).stdout)
            guard wanted else { return }
            let contested = try Self.id(
                in: ostack.run(["records", "create", "task", "--set", "title=Base", "--json"]).stdout)
            _ = try server.control(
                "POST", "modify", #"{"object":"task","id":"\#(contested)","fields":{"title":"Theirs"}}"#)
            _ = try ostack.run(["records", "update", "task", "--set", "title=Mine", "--", contested])
            let conflicts = try ostack.run(["conflicts", "list", "--json"]).stdout
            conflict = try Self.id(in: conflicts)
        }

        static func id(in json: String) throws -> String {
            let range = try #require(json.firstRange(of: "\"id\":\""))
            return String(json[range.upperBound...].prefix { $0 != "\"" })
        }

        /// The example with its placeholders filled in, the stdin flag its secret needs, and the stdin.
        func prepared(_ example: Example) -> (arguments: [String], stdin: String?, passphrase: String?) {
            let host = server.url.replacing("http://", with: "")
            var arguments = example.arguments.map { word -> String in
                switch word {
                case "crm.example.com", "localhost:3000": return host
                case "you@example.com": return "alice@example.com"
                case "tsk_s1": return record
                default:
                    if word.hasPrefix("q_") { return conflict }
                    if word.hasPrefix("~/") { return scratch.path + "/" + word.dropFirst(2) }
                    return word
                }
            }
            // `ID` stands for the conflict in `conflicts …`, else for the record.
            let idFor = arguments.first == "conflicts" ? conflict : record
            arguments = arguments.map { $0 == "ID" ? idFor : $0 }
            var stdin: String?
            var passphrase: String?
            switch arguments.first {
            case "login":
                if !arguments.contains("--password-stdin") { arguments.append("--password-stdin") }
                stdin = "alice-pass\n"
            case "pin" where arguments.dropFirst().first == "set":
                if !arguments.contains("--pin-stdin") { arguments.append("--pin-stdin") }
                stdin = "482913\n482913\n"
            case "unlock":
                // Only an account with a PIN can be unlocked: set one first (see `prepare`).
                if !arguments.contains("--pin-stdin") { arguments.append("--pin-stdin") }
                stdin = "482913\n"
            case "export-database":
                if !arguments.contains("--passphrase-stdin") && !arguments.contains("--plaintext") {
                    arguments.append("--passphrase-stdin")
                    stdin = "correct horse battery\ncorrect horse battery\n"
                }
            case "keyring":
                passphrase = "correct horse battery"
            default: break
            }
            return (arguments, stdin ?? example.input, passphrase)
        }
    }

    @Test func theDocsShowCommands() {
        // The extraction itself: a broken parser would make the examples test vacuous.
        #expect(Self.examples.count >= 30)
        #expect(Self.examples.contains { $0.arguments.starts(with: ["records", "list", "task", "--filter"]) })
        #expect(Self.examples.contains { $0.environment["OSTACK_ACCOUNT"] == "staging" })
    }

    @Test(arguments: examples)
    func everyExampleRuns(_ example: Example) throws {
        let fixture = try Fixture(conflict: example.arguments.first == "conflicts")
        // `lock` and `unlock` are about an account with a PIN.
        if example.arguments.first == "unlock" || example.arguments.first == "lock" {
            #expect(try fixture.ostack.run(["pin", "set", "--pin-stdin"], stdin: "482913\n482913\n").status == 0)
            if example.arguments.first == "unlock" { #expect(try fixture.ostack.run(["lock"]).status == 0) }
        }
        let (arguments, stdin, passphrase) = fixture.prepared(example)
        let result = try fixture.ostack.run(
            arguments, stdin: stdin, environment: example.environment.mapValues { $0 }, passphrase: passphrase)
        #expect(
            result.status == 0,
            "\(example.file):\(example.line): ostack \(arguments.joined(separator: " ")) → \(result.status)\n\(result.stderr)"
        )
    }
}

extension String {
    /// The file's UTF-8 text (no Foundation).
    init(contentsOfFileLite path: String) throws {
        let result = try runProcess(executable: "/bin/cat", arguments: [path])
        self = result.stdout
    }

    fileprivate func trimmedSpaces() -> String {
        var text = Substring(self)
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
