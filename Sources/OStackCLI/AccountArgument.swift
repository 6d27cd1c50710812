import ArgumentParser
import OStackCore

/// The optional account argument of commands that act on one account (default: the selected one,
/// see docs/commands.md "Account selection").
struct AccountArgument: ParsableArguments {
    @Argument(help: "The account (default: the selected one).", completion: ShellCompletions.accounts) var target:
        String?

    /// The account named, or the selected one.
    func account(_ context: CommandContext) throws(OStackError) -> Account {
        guard let account = try context.accounts(target: target, all: false).first else {
            throw OStackError(.noAccount, detail: "no account")
        }
        return account
    }
}
