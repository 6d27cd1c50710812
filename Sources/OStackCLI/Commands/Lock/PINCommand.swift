import ArgumentParser
import OStackCore

/// `ostack pin set|change|remove [ACCOUNT] [--pin-stdin]`
struct PINCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin", abstract: "Protect an account's local data with a PIN.",
        discussion: """
            The PIN protects against someone using this CLI at your unlocked session (5 guesses) and against \
            theft of disk or backups. It does not protect against code running as you. See docs/threat-model.md.
            """,
        subcommands: [PINSet.self, PINChange.self, PINRemove.self])
}

/// Reads PINs: `--pin-stdin` takes one line per PIN asked for; otherwise no-echo prompts.
struct PINInput {
    var fromStdin: Bool
    var noInput: Bool

    func read(_ prompt: String, confirm: Bool = false) throws(OStackError) -> PIN {
        if fromStdin { return PIN(try SecretInput.fromStdin()) }
        let pin = PIN(try SecretInput.prompt(prompt, noInput: noInput, flag: "--pin-stdin"))
        if confirm {
            let again = PIN(try SecretInput.prompt("Repeat the PIN: ", noInput: noInput, flag: "--pin-stdin"))
            guard again == pin else {
                throw OStackError(.invalidInput, context: .init(suggestion: "The two PINs differ."))
            }
        }
        return pin
    }
}

struct PINSet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Set a PIN; prints a recovery key once.")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: AccountArgument
    @Flag(name: .customLong("pin-stdin"), help: "Read the PIN from stdin.") var pinStdin = false

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let service = try context.lockService()
            let account = try selection.account(context)
            try service.verifyAgent()  // before the PIN is asked for: the agent must be able to hold the key
            let pin = try PINInput(fromStdin: pinStdin, noInput: global.noInput).read("New PIN: ", confirm: true)
            // Staged first; the PIN takes effect only after its recovery key was shown (a crash in
            // between leaves the account without the PIN, as before).
            let pending = try service.preparePIN(account, pin: pin)
            let text = pending.recoveryKey.formatted().withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            struct Document: Encodable { var recoveryKey: String }
            context.emit(
                json: Document(recoveryKey: text),
                human: """
                    Your recovery key for \(account.alias) (shown once; keep it somewhere safe):

                        \(text)

                    It unlocks the account after 5 wrong PINs: ostack unlock --recovery-key-stdin
                    """)
            FailPoint.hit("pin-set.after-shown")
            try service.commitPIN(pending)
            if !context.global.json { context.terminal.out("PIN set for \(account.alias).\n") }
            if let warning = context.keyringRetentionWarning(account) { context.note(warning) }
        }
    }
}

struct PINChange: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change", abstract: "Change the PIN (needs the old one).")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: AccountArgument
    @Flag(name: .customLong("pin-stdin"), help: "Read the old and then the new PIN from stdin, one per line.")
    var pinStdin = false

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let service = try context.lockService()
            let account = try selection.account(context)
            try service.verifyAgent()  // before the PINs are asked for: the agent must be able to hold the key
            let input = PINInput(fromStdin: pinStdin, noInput: global.noInput)
            let old = try input.read("Current PIN: ")
            let new = try input.read("New PIN: ", confirm: true)
            try service.changePIN(account, old: old, new: new)
            context.emit(json: ["changed": true], human: "PIN changed for \(account.alias).")
        }
    }
}

struct PINRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove the PIN (needs it).")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: AccountArgument
    @Flag(name: .customLong("pin-stdin"), help: "Read the PIN from stdin.") var pinStdin = false

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let service = try context.lockService()
            let account = try selection.account(context)
            try service.removePIN(
                account, pin: try PINInput(fromStdin: pinStdin, noInput: global.noInput).read("PIN: "))
            context.emit(json: ["removed": true], human: "PIN removed for \(account.alias).")
        }
    }
}
