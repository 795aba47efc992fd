//! Exit codes are part of the interface: scripts branch on them.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success (for `--detailed-exitcode`: success and no changes) |
//! | 1 | invalid input, refused operation or failed apply |
//! | 2 | usage error or a command that is not available yet; with `--detailed-exitcode`, changes present |
//! | 75 | `cooldown check`: wait, the deadline has not passed; `acquire`: refused (EX_TEMPFAIL) |
//! | 76 | `cooldown check`/`probe`: the scope needs an operator, or its state cannot be read (an unregistered namespace included) |

/// Everything went as asked.
pub const OK: i32 = 0;
/// The input was invalid, the store refused, or an apply recorded errors.
pub const FAILURE: i32 = 1;
/// The command line was wrong, or the command is not available yet.
pub const USAGE: i32 = 2;
/// `--detailed-exitcode`: the plan or apply has changes.
pub const CHANGES_PRESENT: i32 = 2;
/// `cooldown check`: not yet; try after the reported instant. `acquire`: refused
/// by a limit (the answer says which and when to retry). EX_TEMPFAIL.
pub const TEMPFAIL: i32 = 75;
/// `cooldown check`: an operator must act (auth rejection, implausible reset) or the
/// stored state is unreadable (corrupt, out of range, or in a namespace that is
/// not registered). Never treated as permission to call.
pub const NEEDS_OPERATOR: i32 = 76;
