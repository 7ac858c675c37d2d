//! CSV records with their line numbers, read with the `csv` crate: quoted
//! fields (commas and quotes inside), a leading byte-order mark, CRLF line
//! ends and blank lines are handled the way spreadsheets write them. Both
//! the offerings reader and the simulator's trace reader use it, so their
//! errors name lines the same way.

/// One record: its 1-based line and its fields, trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Line the record starts on (1-based).
    pub line: usize,
    /// Fields, surrounding spaces trimmed.
    pub fields: Vec<String>,
}

/// A record the CSV reader could not read (an unterminated quote, bytes
/// that are not UTF-8), with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRecord {
    /// Line (1-based; 0 when the reader could not tell).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Every non-blank record of `text`, header included.
pub fn records(text: &str) -> impl Iterator<Item = Result<Record, BadRecord>> + '_ {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Line numbers come from byte offsets: the reader's own line count
    // follows record terminators, not the lines a person sees.
    let newlines: Vec<usize> = text
        .bytes()
        .enumerate()
        .filter(|(_, b)| *b == b'\n')
        .map(|(i, _)| i)
        .collect();
    // A record's position may sit on the terminator before it: step over
    // line ends to the record's first byte.
    let bytes = text.as_bytes();
    let line_of = move |pos: Option<&csv::Position>| {
        pos.map_or(0, |p| {
            let mut byte = usize::try_from(p.byte()).unwrap_or(usize::MAX);
            while byte < bytes.len() && matches!(bytes[byte], b'\r' | b'\n') {
                byte += 1;
            }
            newlines.partition_point(|nl| *nl < byte) + 1
        })
    };
    let reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    reader.into_records().filter_map(move |r| match r {
        Ok(rec) => {
            if rec.iter().all(str::is_empty) {
                return None;
            }
            let line = line_of(rec.position());
            Some(Ok(Record {
                line,
                fields: rec.iter().map(str::to_string).collect(),
            }))
        }
        Err(e) => {
            let line = line_of(e.position());
            let message = match e.kind() {
                csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".to_string(),
                _ => "malformed CSV record".to_string(),
            };
            Some(Err(BadRecord { line, message }))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_and_fields(text: &str) -> Vec<(usize, Vec<String>)> {
        records(text)
            .map(|r| r.map(|r| (r.line, r.fields)).expect("valid"))
            .collect()
    }

    #[test]
    fn quoted_fields_bom_crlf_and_blank_lines() {
        let text = "\u{feff}a,b\r\n\r\n1,\"x, \"\"y\"\"\"\r\n 2 , z \r\n";
        let got = lines_and_fields(text);
        assert_eq!(
            got,
            vec![
                (1, vec!["a".to_string(), "b".to_string()]),
                (3, vec!["1".to_string(), "x, \"y\"".to_string()]),
                (4, vec!["2".to_string(), "z".to_string()]),
            ]
        );
    }

    #[test]
    fn a_quoted_field_over_two_lines_keeps_the_line_it_starts_on() {
        let got = lines_and_fields("h\n\"one\ntwo\"\nlast\n");
        assert_eq!(got[1], (2, vec!["one\ntwo".to_string()]));
        assert_eq!(got[2].0, 4);
    }
}
