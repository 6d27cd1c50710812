import ArgumentParser
import Glibc
import OStackCore

/// Command lines answered before swift-argument-parser runs: `ostack help <topic>` for topics that
/// are not commands (`HelpTopics`), and `ostack status --short`, which a shell prompt runs before
/// every prompt (target: ≤ 1.5 × the process floor, docs/testing.md).
///
/// Parsing the command tree costs more than the command itself (the parser reflects over every
/// command and checks each invocation for a completion-script request), so the exact spellings below
/// are recognised here and everything else — any other flag, `--help`, a repeated or malformed
/// option — falls through to the parser unchanged. The answer is the same either way: both paths
/// call `Status.runShort` with the same `GlobalOptions` and report errors with `CommandRunner`
/// (tested in `StatusShortEndToEndTests`).
public enum EarlyCommand {
    /// Runs the command and exits when `arguments` (without the program name) is one answered here;
    /// returns otherwise.
    public static func runIfMatched(_ arguments: [String]) {
        if let status = run(arguments) { exit(status) }
    }

    /// The exit status when `arguments` was handled here, else nil.
    static func run(_ arguments: [String]) -> Int32? {
        if let topic = HelpTopics.text(for: arguments) {
            print(topic, terminator: "")
            return 0
        }
        if let status = unknownHelpSubject(arguments) { return status }
        guard let global = statusShortOptions(arguments) else { return nil }
        let context = CommandContext.live(global: global)
        do {
            try context.checkEnvironment()
        } catch {
            return CommandRunner.report(error, context: context, logging: false)  // nothing written
        }
        do {
            try Status.runShort(context)
            return 0
        } catch {
            return CommandRunner.report(error, context: context)
        }
    }

    /// `help WORD…` naming no command (swift-argument-parser prints the root help and exits 0 for
    /// it): a usage error, exit 64, like a mistyped command. Nil when it names one, or a topic.
    static func unknownHelpSubject(_ arguments: [String]) -> Int32? {
        guard arguments.count >= 2, arguments[0] == "help", !arguments[1].hasPrefix("-") else { return nil }
        let path = UsageError.commandPath(Array(arguments.dropFirst()))
        guard let word = path.unknownWord, !path.hasDefault || path.names.isEmpty else { return nil }
        let spelled = (["ostack"] + path.names).joined(separator: " ")
        let message = ErrorPresenter.sanitize(
            "'\(word)' is not an ostack command\(path.names.isEmpty ? " or help topic" : "").", maxLength: 300)
        let hint =
            UsageError.nearest(word, in: path.subcommands).map {
                "Did you mean `ostack help \((path.names + [$0]).joined(separator: " "))`?"
            }
            ?? "See `\(spelled) --help` for the commands."
        CommandLineMain.writeUsageError(
            message: message, usageLine: nil, hint: ErrorPresenter.sanitize(hint, maxLength: 300), arguments: arguments)
        return 64
    }

    /// `status --short` with any of `--json`, `--no-input`, `--verbose`, `--no-color`,
    /// `--account VALUE`/`--account=VALUE`, each at most once, in any order; nil for anything else.
    static func statusShortOptions(_ arguments: [String]) -> GlobalOptions? {
        guard arguments.first == "status" else { return nil }
        var seen: Set<String> = []
        var account: String?
        var index = 1
        while index < arguments.count {
            var word = arguments[index]
            index += 1
            if word.hasPrefix("--account=") {
                account = String(word.dropFirst("--account=".count))
                word = "--account"
            } else if word == "--account" {
                guard index < arguments.count else { return nil }
                account = arguments[index]
                index += 1
            } else {
                guard ["--short", "--json", "--no-input", "--verbose", "--no-color"].contains(word) else { return nil }
            }
            guard seen.insert(word).inserted else { return nil }
        }
        if seen.contains("--account") {
            // A value the parser would read differently (empty, or looking like a flag) goes to the parser.
            guard let value = account, !value.isEmpty, !value.hasPrefix("-") else { return nil }
        }
        guard seen.contains("--short") else { return nil }
        return GlobalOptions.unparsed(
            account: account, json: seen.contains("--json"), noInput: seen.contains("--no-input"),
            verbose: seen.contains("--verbose"), noColor: seen.contains("--no-color"))
    }
}
