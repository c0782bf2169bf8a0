//! Routing stage, PURE: the words of a text as the workflow router compares them (the
//! config tokenises each workflow's intent with it at load, the router each task).

use std::collections::BTreeSet;

/// Words that say nothing of what a task is about.
const STOP: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "but", "by", "can", "could", "do", "does", "for", "from", "has", "have", "how", "i", "if",
    "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "please",
    "should", "so", "some", "that", "the", "their", "them", "then", "there", "these", "this", "to",
    "us", "was", "we", "were", "what", "when", "which", "while", "who", "why", "will", "with",
    "would", "you", "your",
];

/// The words of `text`: lower-cased runs of letters and digits, stop words out, each once,
/// sorted.
pub fn words(text: &str) -> Vec<String> {
    let set: BTreeSet<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect();
    set.into_iter().collect()
}
