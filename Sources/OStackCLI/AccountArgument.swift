import ArgumentParser

/// The optional account argument of commands that act on one account (default: the selected one,
/// see docs/commands.md "Account selection").
struct AccountArgument: ParsableArguments {
    @Argument(help: "The account (default: the selected one).") var target: String?
}
