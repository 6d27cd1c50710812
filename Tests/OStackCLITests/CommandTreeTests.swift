import ArgumentParser
import OStackCLI
import Testing

/// The command tree itself.
@Suite struct CommandTreeTests {
    /// Every command in the tree, depth first.
    static func commands(below command: any ParsableCommand.Type = OStackCommand.self) -> [any ParsableCommand.Type] {
        command.configuration.subcommands.flatMap { [$0] + commands(below: $0) }
    }

    /// A command without a `commandName` makes the parser derive it from the type name with
    /// `String(describing:)` at every start — a scan of the binary's protocol conformances per
    /// command, a millisecond on each invocation of `ostack` (docs/decisions/0008-fast-start-up.md).
    @Test func everyCommandNamesItself() {
        let commands = Self.commands()
        #expect(commands.count > 50)
        let unnamed = commands.filter { $0.configuration.commandName == nil }.map { "\($0)" }
        #expect(unnamed.isEmpty, "commands without a commandName: \(unnamed)")
    }

    /// Options built without the parser (`status --short`, shell completions) can be read: an
    /// option neither parsed nor set would stop the process. Reads every option.
    @Test func unparsedOptionsAreComplete() {
        let global = GlobalOptions.unparsed(account: "work", json: true)
        #expect(global.account == "work" && global.json && global.format == nil && global.jq == nil)
        #expect(global.template == nil && global.timeout == nil && global.keyring == nil)
        #expect(!global.noInput && !global.verbose && !global.noColor)
        #expect(global.wantsJSON && global.jsonErrors && global.timeoutSeconds == nil)
    }
}
