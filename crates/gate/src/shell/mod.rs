//! tools stage (gate), PURE: the shell layer of the gate: the tokenizer, word rules and the brush-
//! parser cross-check.

pub(crate) mod brush;
pub(crate) mod lex;
pub(crate) mod words;
