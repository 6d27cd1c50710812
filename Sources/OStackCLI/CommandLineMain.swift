import ArgumentParser
import Glibc
import OStackCore

/// The process entry point: parse, run, and turn a usage error into the same shape as every other
/// error (docs/errors.md, "Usage errors"): `ostack: error: …` and `ostack: hint: …` lines on
/// stderr, or under `--json` one `{"error":{"code":"usage",…}}` document; exit 64. A mistyped
/// subcommand gets a "did you mean". Help, `--version` and completion requests print to stdout.
public enum CommandLineMain {
    /// The executable's entry: like `run`, but the audit anchors of the command are written to the
    /// keyring while it goes on (`AnchorWrites`); the process's `exit` waits for them.
    public static func runAsProcess(_ arguments: [String]) async -> Int32 {
        AnchorWrites.deferUntilSettled()
        return await run(arguments)
    }

    /// The 1-based position of the first process argument that is not valid UTF-8, if any. Swift's
    /// `CommandLine.arguments` replaces such bytes with U+FFFD, so `--set title=…` stored other text
    /// than given and a file name named another file; such an argument is refused instead.
    public static func firstArgumentNotUTF8() -> Int? {
        for position in stride(from: 1, to: Int(CommandLine.argc), by: 1) {  // argc may be 0 (an exec with no argv)
            guard let pointer = CommandLine.unsafeArgv[position] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
            if String(validating: bytes, as: UTF8.self) == nil { return position }
        }
        return nil
    }

    /// The usage error for `firstArgumentNotUTF8` (exit 64).
    public static func refuseArgumentNotUTF8(at position: Int, arguments: [String]) -> Int32 {
        writeUsageError(
            message: "Argument \(position) is not valid UTF-8.", usageLine: nil,
            hint: "Arguments are read as UTF-8 text: check the encoding of the terminal or script that passed it.",
            arguments: arguments)
        return 64
    }

    public static func run(_ arguments: [String]) async -> Int32 {
        do {
            let command = try await OStackCommand.asyncParseAsRoot(arguments)
            try await execute(command)
            return 0
        } catch let exit as ExitCode {
            return exit.rawValue  // the command reported its own error
        } catch {
            return report(error, arguments: arguments)
        }
    }

    private static func execute<Command: ParsableCommand>(_ command: Command) async throws {
        var command = command
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    }

    static func report(_ error: any Error, arguments: [String]) -> Int32 {
        let code = OStackCommand.exitCode(for: error)
        let full = OStackCommand.fullMessage(for: error)
        if code == .success {
            if !full.isEmpty { Terminal.write(STDOUT_FILENO, full.hasSuffix("\n") ? full : full + "\n") }
            return 0
        }
        let usage = UsageError(error: error, fullMessage: full, arguments: arguments)
        writeUsageError(message: usage.message, usageLine: usage.usageLine, hint: usage.hint, arguments: arguments)
        return code.rawValue
    }

    /// A usage error on stderr: one JSON document when the command line asks for JSON, else the
    /// `ostack: error:` / `usage:` / `hint:` lines. The texts are sanitised already.
    static func writeUsageError(message: String, usageLine: String?, hint: String, arguments: [String]) {
        if wantsJSON(arguments) {
            let document = JSONOutput.ErrorDocument(error: .init(code: "usage", message: message, hint: hint))
            Terminal.write(STDERR_FILENO, JSONOutput.encode(document) + "\n")
        } else {
            Terminal.write(STDERR_FILENO, "ostack: error: \(message)\n")
            if let usageLine { Terminal.write(STDERR_FILENO, "ostack: usage: \(usageLine)\n") }
            Terminal.write(STDERR_FILENO, "ostack: hint: \(hint)\n")
        }
    }

    /// Whether the command line asks for JSON (`--json`, `--format json`, `--format=json`), read
    /// without the parser, which has just failed.
    /// `records import`'s `--format` names its file's format, not its output's.
    static func wantsJSON(_ arguments: [String]) -> Bool {
        let formatIsOutput = UsageError.commandPath(arguments).names != ["records", "import"]
        for (index, argument) in arguments.enumerated() {
            if argument == "--" { return false }
            if argument == "--json" || (formatIsOutput && argument == "--format=json") { return true }
            if formatIsOutput, argument == "--format", index + 1 < arguments.count, arguments[index + 1] == "json" {
                return true
            }
        }
        return false
    }
}

/// What a usage error says, in ostack's words.
struct UsageError {
    var message: String
    var usageLine: String?
    var hint: String

    init(error: any Error, fullMessage: String, arguments: [String]) {
        let path = Self.commandPath(arguments)
        let spelled = (["ostack"] + path.names).joined(separator: " ")
        var message = OStackCommand.message(for: error)
        // Under a group with a default subcommand the word may be that subcommand's argument: then
        // only when the parser tripped over it (`audit work --bogus` is about `--bogus`).
        if let word = path.unknownWord,
            !path.hasDefault || (message.contains("nexpected argument") && message.contains("'\(word)'"))
        {
            message = "'\(word)' is not an ostack command."
            if let near = Self.nearest(word, in: path.subcommands) {
                hint = "Did you mean `\(spelled) \(near)`? See `\(spelled) --help`."
            } else {
                hint = "See `\(spelled) --help` for the commands."
            }
        } else {
            hint = "See `\(spelled) --help`."
        }
        // Record ids may start with '-' (the server's alphabet has it): the parser takes `-abc12`
        // for options and then says an argument is missing, which sends the user looking elsewhere.
        if path.unknownWord == nil, let dashed = Self.dashLedArgument(arguments) {
            let shown = dashed.count > 40 ? String(dashed.prefix(40)) + "…" : dashed
            hint =
                "An argument that starts with '-', such as the id '\(shown)', goes after `--` (everything after it "
                + "is an argument, never an option): `\(spelled) … -- \(shown)`."
        }
        if message.hasPrefix("Error: ") { message = String(message.dropFirst(7)) }
        if !message.hasSuffix(".") { message += "." }
        self.message = ErrorPresenter.sanitize(message, maxLength: 300)
        var usage = fullMessage.split(separator: "\n").first { $0.hasPrefix("Usage: ") }.map { String($0.dropFirst(7)) }
        // An option check that runs with the command (`GlobalOptions.checkOutputFormat`) is
        // reported with the root's usage: the command's own is more use.
        if path.unknownWord == nil, !path.names.isEmpty, usage == "ostack <subcommand>",
            let command = Self.command(at: path.names)
        {
            usage = OStackCommand.usageString(for: command)
        }
        usageLine = usage.map { ErrorPresenter.sanitize($0, maxLength: 300) }
        hint = ErrorPresenter.sanitize(hint, maxLength: 300)
    }

    /// The first word before any `--` that starts with one '-' and is longer than a short option or
    /// a cluster of two (`-y`, `-yf`): an id, most likely, that the parser read as options.
    static func dashLedArgument(_ arguments: [String]) -> String? {
        for argument in arguments {
            if argument == "--" { return nil }
            if argument.hasPrefix("-"), !argument.hasPrefix("--"), argument.count > 3 { return argument }
        }
        return nil
    }

    /// The subcommands named on the command line, and the first word that should have named one
    /// but does not (a word where a command with subcommands expects its subcommand).
    static func commandPath(_ arguments: [String]) -> (
        names: [String], subcommands: [String], unknownWord: String?, hasDefault: Bool
    ) {
        var group = Self.describe(OStackCommand.self)
        var names: [String] = []
        for argument in arguments {
            if group.children.isEmpty || argument.hasPrefix("-") { break }
            let described = group.children.map(Self.describe)
            guard let next = described.first(where: { $0.name == argument || $0.aliases.contains(argument) }) else {
                return (names, described.map(\.name), argument == "help" ? nil : argument, group.hasDefault)
            }
            names.append(next.name)
            group = next
        }
        return (names, [], nil, false)
    }

    /// The command type the names lead to.
    static func command(at names: [String]) -> (any ParsableCommand.Type)? {
        var type: any ParsableCommand.Type = OStackCommand.self
        for name in names {
            guard let next = describe(type).children.first(where: { describe($0).name == name }) else { return nil }
            type = next
        }
        return type
    }

    static func describe(_ type: any ParsableCommand.Type) -> (
        name: String, aliases: [String], children: [any ParsableCommand.Type], hasDefault: Bool
    ) {
        func open<Command: ParsableCommand>(_: Command.Type) -> (String, [String], [any ParsableCommand.Type], Bool) {
            (
                Command._commandName, Command.configuration.aliases, Command.configuration.subcommands,
                Command.configuration.defaultSubcommand != nil
            )
        }
        return open(type)
    }

    /// The only name starting with `word`, else the closest name within two edits.
    static func nearest(_ word: String, in names: [String]) -> String? {
        let word = word.lowercased()
        let prefixed = names.filter { $0.hasPrefix(word) }
        if prefixed.count == 1 { return prefixed[0] }
        let scored = names.map { ($0, editDistance(word, $0)) }.filter { $0.1 <= 2 }
        return scored.min(by: { $0.1 < $1.1 })?.0
    }

    /// Levenshtein distance, with a swap of two neighbours counting as one edit.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
