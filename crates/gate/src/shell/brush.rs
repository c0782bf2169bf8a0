//! tools stage (gate), PURE: the one file that talks to brush-parser: the real grammar must see the
//! same simple commands as the tokenizer.

pub(crate) fn brush_shape(src: &str) -> Result<Vec<(usize, usize)>, String> {
    use brush_parser::ast;
    let parsed = std::panic::catch_unwind(|| {
        let options = brush_parser::ParserOptions::default();
        let mut parser =
            brush_parser::Parser::new(std::io::BufReader::new(src.as_bytes()), &options);
        parser.parse_program()
    });
    let program = match parsed {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(format!("the bash parser rejects the command: {e}")),
        Err(_) => return Err("the bash parser failed on the command".into()),
    };
    let mut shape = Vec::new();
    for list in &program.complete_commands {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            let rest = and_or.additional.iter().map(|x| match x {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
            });
            for pipeline in std::iter::once(&and_or.first).chain(rest) {
                if pipeline.bang {
                    return Err("`!` pipelines are not understood by the gate".into());
                }
                // `time [-p]` belongs to the pipeline here; the tokenizer keeps its words in
                // the first command, where the judge strips them.
                let mut timed_words = match &pipeline.timed {
                    None => 0,
                    Some(t) if t.is_posix_output() => 2,
                    Some(_) => 1,
                };
                if timed_words > 0 && pipeline.seq.is_empty() {
                    return Err("`time` with no command to run".into());
                }
                for cmd in &pipeline.seq {
                    let ast::Command::Simple(sc) = cmd else {
                        return Err("the bash parser sees a compound command here".into());
                    };
                    let (mut words, mut redirs) = (0, 0);
                    let items = sc
                        .prefix
                        .iter()
                        .flat_map(|p| p.0.iter())
                        .chain(sc.suffix.iter().flat_map(|s| s.0.iter()));
                    for item in items {
                        match item {
                            ast::CommandPrefixOrSuffixItem::IoRedirect(_) => redirs += 1,
                            ast::CommandPrefixOrSuffixItem::Word(_)
                            | ast::CommandPrefixOrSuffixItem::AssignmentWord(..) => words += 1,
                            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                                return Err("process substitution is always denied".into())
                            }
                        }
                    }
                    words += usize::from(sc.word_or_name.is_some()) + timed_words;
                    timed_words = 0;
                    shape.push((words, redirs));
                }
            }
        }
    }
    Ok(shape)
}
