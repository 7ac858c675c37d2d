//! The install guides name what the chart creates. `docs/install.md`,
//! `docs/eks.md`, `docs/gke.md`, `docs/karpenter.md` and
//! `docs/quickstart-local.md` bind cloud
//! identities to a ServiceAccount, wait on a Deployment, and so on, by name;
//! the chart names those objects after the release. This test reads the
//! guides' shell blocks and inline commands, takes every namespace,
//! ServiceAccount, Deployment, Service and MutatingWebhookConfiguration name
//! a command uses (`--namespace X`, `-n X`, `--service-account X`,
//! eksctl's `iamserviceaccount --name X`, `system:serviceaccount:NS:NAME`,
//! `PROJECT.svc.id.goog[NS/NAME]`, `kubectl ... serviceaccount NAME`,
//! `deployment/NAME`, `service/NAME`, ...), renders the chart with each
//! guide's own `helm install` (release, namespace, `--set` and the values
//! file the guide writes) and fails on every name the chart does not create,
//! with the file, the line and the name the chart creates instead.

mod helm;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use helm::{chart, helm, objects};

/// The guides whose commands are checked.
const GUIDES: [&str; 5] = [
    "docs/install.md",
    "docs/eks.md",
    "docs/gke.md",
    "docs/karpenter.md",
    "docs/quickstart-local.md",
];

/// Namespaces a guide may name without creating them.
const CLUSTER_NAMESPACES: [&str; 1] = ["kube-system"];

/// The kinds of object the chart creates whose names guides use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    ServiceAccount,
    Deployment,
    Service,
    MutatingWebhookConfiguration,
}

impl Kind {
    /// The kind as the API names it.
    fn as_str(self) -> &'static str {
        match self {
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Deployment => "Deployment",
            Kind::Service => "Service",
            Kind::MutatingWebhookConfiguration => "MutatingWebhookConfiguration",
        }
    }

    /// The kind of a kubectl resource word (`deployment`, `deploy`, `sa`, ...).
    fn of_kubectl(word: &str) -> Option<Kind> {
        match word.to_ascii_lowercase().as_str() {
            "serviceaccount" | "serviceaccounts" | "sa" => Some(Kind::ServiceAccount),
            "deployment" | "deployments" | "deploy" => Some(Kind::Deployment),
            "service" | "services" | "svc" => Some(Kind::Service),
            "mutatingwebhookconfiguration" | "mutatingwebhookconfigurations" => {
                Some(Kind::MutatingWebhookConfiguration)
            }
            _ => None,
        }
    }

    fn namespaced(self) -> bool {
        self != Kind::MutatingWebhookConfiguration
    }

    /// The kind of a rendered object's `kind`.
    fn of_api(kind: &str) -> Option<Kind> {
        [
            Kind::ServiceAccount,
            Kind::Deployment,
            Kind::Service,
            Kind::MutatingWebhookConfiguration,
        ]
        .into_iter()
        .find(|k| k.as_str() == kind)
    }
}

/// A name a guide's command uses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Use {
    /// A namespace (`--namespace X`, `-n X`).
    Namespace(String),
    /// An object: its kind, namespace (none for cluster-scoped kinds) and name.
    Object {
        kind: Kind,
        namespace: Option<String>,
        name: String,
    },
}

/// A name of a guide that the chart does not create.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mismatch {
    file: String,
    line: usize,
    message: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// One word of a shell command and the line of the guide it is on.
#[derive(Debug, Clone)]
struct Word {
    text: String,
    line: usize,
}

/// One command: its words, quotes removed, `|`, `;` and `&&` ending it.
#[derive(Debug, Clone)]
struct Command {
    words: Vec<Word>,
    /// Variables assigned before it in the guide (`export X=...`, `X=...`),
    /// with literal values; one assigned from a command's output is absent.
    vars: BTreeMap<String, String>,
}

impl Command {
    fn line(&self) -> usize {
        self.words.first().map_or(0, |w| w.line)
    }

    fn texts(&self) -> Vec<&str> {
        self.words.iter().map(|w| w.text.as_str()).collect()
    }

    /// The value of flag `long` (or `short`): `--flag X` or `--flag=X`,
    /// with the word it was taken from.
    fn flag(&self, long: &str, short: Option<&str>) -> Option<&Word> {
        self.flags(long, short).into_iter().next()
    }

    /// Every value of a repeated flag.
    fn flags(&self, long: &str, short: Option<&str>) -> Vec<&Word> {
        let mut out = Vec::new();
        let mut it = self.words.iter().peekable();
        while let Some(w) = it.next() {
            let is = w.text == long || short.is_some_and(|s| w.text == s);
            if is {
                if let Some(v) = it.next() {
                    out.push(v);
                }
            } else if w.text.starts_with(&format!("{long}=")) {
                out.push(w);
            }
        }
        out
    }
}

/// The value of a flag word: `X` of `--flag X`, or of `--flag=X`.
fn flag_value(w: &Word) -> &str {
    match w.text.split_once('=') {
        Some((f, v)) if f.starts_with('-') => v,
        _ => &w.text,
    }
}

/// Splits one line of shell into words: quotes removed, `\` escapes taken,
/// `#` comments dropped, `|`, `;`, `&&` and `||` words of their own. Returns
/// whether the line ends in `\` (the command goes on).
fn split_line(line: &str) -> (Vec<String>, bool) {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut started = false;
    let mut chars = line.chars().peekable();
    let (mut single, mut double) = (false, false);
    let flush = |cur: &mut String, started: &mut bool, words: &mut Vec<String>| {
        if *started {
            words.push(std::mem::take(cur));
            *started = false;
        }
    };
    while let Some(c) = chars.next() {
        if single {
            if c == '\'' {
                single = false;
            } else {
                cur.push(c);
            }
            continue;
        }
        if double {
            match c {
                '"' => double = false,
                '\\' => match chars.peek() {
                    Some(&n @ ('$' | '`' | '"' | '\\')) => {
                        cur.push(n);
                        chars.next();
                    }
                    _ => cur.push('\\'),
                },
                _ => cur.push(c),
            }
            continue;
        }
        match c {
            '\'' => {
                single = true;
                started = true;
            }
            '"' => {
                double = true;
                started = true;
            }
            '\\' => match chars.next() {
                None => {
                    flush(&mut cur, &mut started, &mut words);
                    return (words, true);
                }
                Some(n) => {
                    cur.push(n);
                    started = true;
                }
            },
            '#' if !started => break,
            c if c.is_whitespace() => flush(&mut cur, &mut started, &mut words),
            '|' | ';' | '&' => {
                flush(&mut cur, &mut started, &mut words);
                let mut op = c.to_string();
                if chars.peek() == Some(&c) {
                    op.push(c);
                    chars.next();
                }
                words.push(op);
            }
            _ => {
                cur.push(c);
                started = true;
            }
        }
    }
    flush(&mut cur, &mut started, &mut words);
    (words, false)
}

/// `$NAME`, `${NAME}` and `${NAME<modifier>}` replaced by the variable's
/// value, or by the name in lower case (`$QUEUE_URL`: `queue-url`) when
/// the guide gives it no literal value.
fn substitute(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, len) = if let Some(inner) = after.strip_prefix('{') {
            let end = inner.find('}').map_or(inner.len(), |e| e + 1);
            let name: String = inner
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (name, end + 1)
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let len = name.len();
            (name, len)
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
            continue;
        }
        match vars.get(&name) {
            Some(v) => out.push_str(v),
            None => out.push_str(&name.to_ascii_lowercase().replace('_', "-")),
        }
        rest = &after[len.min(after.len())..];
    }
    out.push_str(rest);
    out
}

/// What a guide holds: its commands and the files its heredocs write.
#[derive(Debug, Default)]
struct Guide {
    commands: Vec<Command>,
    /// `cat > FILE <<EOF` bodies, variables substituted unless the
    /// delimiter is quoted, with the line each starts on, in order.
    files: Vec<(String, usize, String)>,
}

/// Splits a guide into commands: every logical line of its `sh` blocks (a
/// heredoc's body is a file, not commands) and every inline code span of
/// its prose that reads as a command.
fn parse(text: &str) -> Guide {
    let mut guide = Guide::default();
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut prose = String::new();
    let mut prose_lines: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let fence = line.trim_start();
        if let Some(lang) = fence.strip_prefix("```") {
            let shell = matches!(lang.trim(), "sh" | "bash" | "shell");
            let mut pending: Vec<Word> = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                if !shell {
                    i += 1;
                    continue;
                }
                let (ws, more) = split_line(lines[i]);
                let heredoc = ws
                    .iter()
                    .find_map(|w| w.strip_prefix("<<").map(String::from));
                pending.extend(ws.into_iter().map(|text| Word { text, line: i + 1 }));
                if let Some(delim) = heredoc {
                    let target = pending
                        .iter()
                        .position(|w| w.text == ">")
                        .and_then(|p| pending.get(p + 1))
                        .map(|w| w.text.clone());
                    let quoted = lines[i].contains("<<'") || lines[i].contains("<<\"");
                    let start = i + 2;
                    let mut body = String::new();
                    i += 1;
                    while i < lines.len() && lines[i] != delim {
                        body.push_str(lines[i]);
                        body.push('\n');
                        i += 1;
                    }
                    if let Some(file) = target {
                        let body = if quoted {
                            body
                        } else {
                            substitute(&body, &vars)
                        };
                        guide.files.push((file, start, body));
                    }
                }
                if !more || heredoc_ended(&pending) {
                    commands(std::mem::take(&mut pending), &mut vars, &mut guide);
                }
                i += 1;
            }
            commands(pending, &mut vars, &mut guide);
            i += 1;
            continue;
        }
        prose.push_str(line);
        prose.push('\n');
        prose_lines.push(i + 1);
        i += 1;
    }
    // inline code spans, which may run over a line break
    let mut line_of = Vec::new();
    for (n, l) in prose.lines().enumerate() {
        line_of.extend(std::iter::repeat_n(prose_lines[n], l.len() + 1));
    }
    let mut offset = 0;
    for (k, part) in prose.split('`').enumerate() {
        if k % 2 == 1 {
            let first = line_of.get(offset).copied().unwrap_or(0);
            let mut ws = Vec::new();
            for (line, physical) in (first..).zip(part.split('\n')) {
                let (words, _) = split_line(physical);
                ws.extend(words.into_iter().map(|text| Word { text, line }));
            }
            commands(ws, &mut vars, &mut guide);
        }
        offset += part.len() + 1;
    }
    guide
}

/// Whether the words end in a heredoc start (its body already read).
fn heredoc_ended(words: &[Word]) -> bool {
    words.last().is_some_and(|w| w.text.starts_with("<<"))
}

/// Splits words at `|`, `;`, `&&` and `||` into commands, noting literal
/// variable assignments.
fn commands(words: Vec<Word>, vars: &mut BTreeMap<String, String>, guide: &mut Guide) {
    let mut cur: Vec<Word> = Vec::new();
    let mut finish = |cur: Vec<Word>, vars: &mut BTreeMap<String, String>| {
        if cur.is_empty() {
            return;
        }
        for w in cur.iter().skip_while(|w| w.text == "export") {
            let Some((name, value)) = w.text.split_once('=') else {
                break;
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                break;
            }
            if value.contains("$(") {
                vars.remove(name);
            } else {
                let value = substitute(value, vars);
                vars.insert(name.to_string(), value);
            }
        }
        guide.commands.push(Command {
            words: cur,
            vars: vars.clone(),
        });
    };
    for w in words {
        if matches!(w.text.as_str(), "|" | ";" | "&&" | "||" | "&") {
            finish(std::mem::take(&mut cur), vars);
        } else {
            cur.push(w);
        }
    }
    finish(cur, vars);
}

/// The names one command uses, each with its line.
fn uses(cmd: &Command) -> Vec<(usize, Use)> {
    let mut out = Vec::new();
    let words = cmd.texts();
    let Some(program) = words.first().copied() else {
        return out;
    };
    let name = |w: &Word| substitute(&w.text, &cmd.vars);
    let namespace_word = cmd.flag("--namespace", Some("-n"));
    let namespace = namespace_word.map(|w| substitute(flag_value(w), &cmd.vars));
    let known = ["kubectl", "helm", "aws", "eksctl"].contains(&program);
    if known && let Some(w) = namespace_word {
        out.push((w.line, Use::Namespace(substitute(flag_value(w), &cmd.vars))));
    }
    // AWS: the Pod Identity association's ServiceAccount
    if program == "aws"
        && let Some(sa) = cmd.flag("--service-account", None)
    {
        out.push((
            sa.line,
            object(Kind::ServiceAccount, namespace.clone(), flag_value(sa), cmd),
        ));
    }
    // eksctl: the IRSA role's ServiceAccount
    if program == "eksctl"
        && words.contains(&"iamserviceaccount")
        && let Some(sa) = cmd.flag("--name", None)
    {
        out.push((
            sa.line,
            object(Kind::ServiceAccount, namespace.clone(), flag_value(sa), cmd),
        ));
    }
    // the identity an IAM trust policy or a Workload Identity member names
    for w in &cmd.words {
        let text = name(w);
        if let Some(i) = text.find("system:serviceaccount:") {
            let rest = &text[i + "system:serviceaccount:".len()..];
            let mut parts = rest.splitn(2, ':');
            if let (Some(ns), Some(sa)) = (parts.next(), parts.next()) {
                let sa: String = sa.chars().take_while(|c| is_name_char(*c)).collect();
                out.push((
                    w.line,
                    object(Kind::ServiceAccount, Some(ns.into()), &sa, cmd),
                ));
            }
        }
        if let Some(i) = text.find(".svc.id.goog[") {
            let rest = &text[i + ".svc.id.goog[".len()..];
            if let Some((ns, sa)) = rest.split_once(']').and_then(|(m, _)| m.split_once('/')) {
                out.push((
                    w.line,
                    object(Kind::ServiceAccount, Some(ns.into()), sa, cmd),
                ));
            }
        }
    }
    if program != "kubectl" {
        return out;
    }
    // kubectl: TYPE/NAME, TYPE NAME, and `set serviceaccount RESOURCE NAME`
    let args: Vec<&Word> = cmd
        .words
        .iter()
        .skip(1)
        .filter(|w| !w.text.starts_with('-'))
        .filter(|w| {
            // values of flags taking one
            !cmd.words.windows(2).any(|p| {
                std::ptr::eq(&p[1], *w)
                    && [
                        "-n",
                        "--namespace",
                        "-o",
                        "-l",
                        "-f",
                        "--field-selector",
                        "-L",
                    ]
                    .contains(&p[0].text.as_str())
            })
        })
        .collect();
    let set_sa = words.windows(2).any(|p| p == ["set", "serviceaccount"]);
    let mut k = 0;
    while k < args.len() {
        let w = args[k];
        if let Some((ty, n)) = w.text.split_once('/')
            && let Some(kind) = Kind::of_kubectl(ty)
        {
            out.push((w.line, object(kind, namespace.clone(), n, cmd)));
            if set_sa && let Some(sa) = args.get(k + 1) {
                out.push((
                    sa.line,
                    object(Kind::ServiceAccount, namespace.clone(), &sa.text, cmd),
                ));
                k += 1;
            }
        } else if let Some(kind) = Kind::of_kubectl(&w.text)
            && !(set_sa && kind == Kind::ServiceAccount)
            && let Some(n) = args.get(k + 1)
            && !n.text.contains('/')
        {
            out.push((n.line, object(kind, namespace.clone(), &n.text, cmd)));
            k += 1;
        }
        k += 1;
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.'
}

/// A use of object `kind` named `name` (variables substituted) in
/// `namespace` (kubectl's `default` when a namespaced kind has none).
fn object(kind: Kind, namespace: Option<String>, name: &str, cmd: &Command) -> Use {
    Use::Object {
        kind,
        namespace: kind
            .namespaced()
            .then(|| namespace.unwrap_or_else(|| "default".into())),
        name: substitute(name, &cmd.vars),
    }
}

/// A `helm install` or `helm upgrade --install` of `charts/muster`.
#[derive(Debug, Clone)]
struct Install {
    line: usize,
    release: String,
    namespace: String,
    /// `--values` files, as the guide names them.
    values: Vec<String>,
    /// `--set`, `--set-string`, `--set-json` flags and their values.
    sets: Vec<(String, String)>,
}

/// The guide's installs of the chart.
fn installs(guide: &Guide) -> Vec<Install> {
    let with_value = [
        "--namespace",
        "-n",
        "--values",
        "-f",
        "--set",
        "--set-string",
        "--set-json",
        "--set-file",
        "--version",
        "--timeout",
        "--kube-context",
        "--repo",
    ];
    let mut out = Vec::new();
    for cmd in &guide.commands {
        let words = cmd.texts();
        if words.first() != Some(&"helm") {
            continue;
        }
        let mut positional = Vec::new();
        let mut k = 1;
        while k < words.len() {
            let w = words[k];
            if with_value.contains(&w) {
                k += 2;
                continue;
            }
            if !w.starts_with('-') {
                positional.push(w);
            }
            k += 1;
        }
        let (release, chart) = match positional.as_slice() {
            ["install", r, c, ..] | ["upgrade", r, c, ..] => (*r, *c),
            _ => continue,
        };
        if !chart.ends_with("charts/muster") {
            continue;
        }
        let mut sets = Vec::new();
        for flag in ["--set", "--set-string", "--set-json"] {
            for w in cmd.flags(flag, None) {
                sets.push((flag.to_string(), substitute(flag_value(w), &cmd.vars)));
            }
        }
        out.push(Install {
            line: cmd.line(),
            release: substitute(release, &cmd.vars),
            namespace: cmd.flag("--namespace", Some("-n")).map_or_else(
                || "default".into(),
                |w| substitute(flag_value(w), &cmd.vars),
            ),
            values: cmd
                .flags("--values", Some("-f"))
                .into_iter()
                .map(|w| flag_value(w).to_string())
                .collect(),
            sets,
        });
    }
    out
}

/// What one install creates: (kind, namespace, name).
type Created = BTreeSet<(Kind, Option<String>, String)>;

/// Renders the chart as `install` does, with the values files the guide
/// wrote before it; `Err` says why it could not.
fn render(guide: &Guide, install: &Install, dir: &Path) -> Result<Created, String> {
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    let mut args: Vec<String> = [
        "template",
        &install.release,
        chart,
        "--namespace",
        &install.namespace,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (n, file) in install.values.iter().enumerate() {
        let Some((_, _, body)) = guide
            .files
            .iter()
            .rev()
            .find(|(f, start, _)| f == file && *start < install.line)
        else {
            return Err(format!(
                "the values file {file} is not written before the install"
            ));
        };
        let path = dir.join(format!("values-{}-{n}.yaml", install.line));
        std::fs::write(&path, body).expect("write values");
        args.extend(["--values".into(), path.to_str().expect("utf-8").to_string()]);
    }
    for (flag, value) in &install.sets {
        args.extend([flag.clone(), value.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rendered = helm(&args)?;
    let mut created = Created::new();
    for o in objects(&rendered) {
        let Some(kind) = o["kind"].as_str().and_then(Kind::of_api) else {
            continue;
        };
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let namespace = kind.namespaced().then(|| {
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or(&install.namespace)
                .to_string()
        });
        created.insert((kind, namespace, name));
    }
    Ok(created)
}

/// Every name `text` (the guide `file`) uses that its chart installs do not
/// create, and every install that does not render; with the uses found, so
/// a caller can tell the check was not vacuous.
fn check(file: &str, text: &str) -> (Vec<Mismatch>, Vec<Use>) {
    let guide = parse(text);
    let mut mismatches = Vec::new();
    let mismatch = |line: usize, message: String| Mismatch {
        file: file.to_string(),
        line,
        message,
    };
    let installs = installs(&guide);
    if installs.is_empty() {
        mismatches.push(mismatch(0, "no `helm install` of charts/muster".into()));
        return (mismatches, Vec::new());
    }
    let dir = std::env::temp_dir().join(format!(
        "muster-docs-names-{}-{}",
        std::process::id(),
        file.replace('/', "-")
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut created = Created::new();
    let mut releases = BTreeSet::new();
    for install in &installs {
        match render(&guide, install, &dir) {
            Ok(c) => created.extend(c),
            Err(e) => mismatches.push(mismatch(
                install.line,
                format!("the chart does not render: {e}"),
            )),
        }
        releases.insert((install.release.clone(), install.namespace.clone()));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let chart_namespaces: BTreeSet<String> = releases.iter().map(|(_, ns)| ns.clone()).collect();
    let release_text = releases
        .iter()
        .map(|(r, ns)| format!("release {r} in {ns}"))
        .collect::<Vec<_>>()
        .join(", ");
    // namespaces the guide creates for other things
    let mut own: BTreeSet<String> = CLUSTER_NAMESPACES.iter().map(|s| s.to_string()).collect();
    for cmd in &guide.commands {
        let words = cmd.texts();
        if words.starts_with(&["kubectl", "create", "namespace"]) {
            if let Some(ns) = words.get(3) {
                own.insert(substitute(ns, &cmd.vars));
            }
        } else if words.first() == Some(&"helm")
            && words.contains(&"--create-namespace")
            && let Some(w) = cmd.flag("--namespace", Some("-n"))
        {
            own.insert(substitute(flag_value(w), &cmd.vars));
        }
    }
    let mut found = Vec::new();
    for cmd in &guide.commands {
        for (line, u) in uses(cmd) {
            let placeholder = |s: &str| s.contains('<') || s.contains('>');
            match &u {
                Use::Namespace(ns) => {
                    if !placeholder(ns) && !chart_namespaces.contains(ns) && !own.contains(ns) {
                        mismatches.push(mismatch(
                            line,
                            format!(
                                "namespace {ns} is neither the chart's ({release_text}) nor one the guide creates"
                            ),
                        ));
                    }
                }
                Use::Object {
                    kind,
                    namespace,
                    name,
                } => {
                    if placeholder(name) || namespace.as_deref().is_some_and(placeholder) {
                        continue;
                    }
                    let ours = match namespace {
                        None => true,
                        Some(ns) => chart_namespaces.contains(ns) || !own.contains(ns),
                    };
                    if !ours || created.contains(&(*kind, namespace.clone(), name.clone())) {
                        found.push(u.clone());
                        continue;
                    }
                    let shown = |ns: &Option<String>, n: &str| match ns {
                        Some(ns) => format!("{ns}/{n}"),
                        None => n.to_string(),
                    };
                    let instead: Vec<String> = created
                        .iter()
                        .filter(|(k, _, _)| k == kind)
                        .map(|(k, ns, n)| format!("{} {}", k.as_str(), shown(ns, n)))
                        .collect();
                    mismatches.push(mismatch(
                        line,
                        format!(
                            "{} {} is not what the chart creates ({release_text}): it creates {}",
                            kind.as_str(),
                            shown(namespace, name),
                            if instead.is_empty() {
                                "none".to_string()
                            } else {
                                instead.join(", ")
                            }
                        ),
                    ));
                }
            }
            found.push(u);
        }
    }
    (mismatches, found)
}

fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn the_install_guides_name_what_the_chart_creates() {
    let mut all = Vec::new();
    for file in GUIDES {
        let text = std::fs::read_to_string(repo_path(file)).expect("read guide");
        let (mismatches, found) = check(file, &text);
        all.extend(mismatches);
        let has = |k: Kind| {
            found
                .iter()
                .any(|u| matches!(u, Use::Object { kind, .. } if *kind == k))
        };
        assert!(
            has(Kind::Deployment),
            "{file}: no Deployment name found in {found:?}"
        );
        if file != "docs/quickstart-local.md" {
            assert!(
                has(Kind::ServiceAccount),
                "{file}: no ServiceAccount name found in {found:?}"
            );
        }
    }
    assert!(
        all.is_empty(),
        "names in the guides that the chart does not create:\n{}",
        all.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The commands the EKS guide gave before it installed the chart: its
/// ServiceAccount, Deployment and namespace were not the chart's.
const WRONG: &str = r#"# A guide

```sh
export CLUSTER=prod
helm upgrade --install muster charts/muster \
  --namespace muster-system --create-namespace \
  --set clusterName=$CLUSTER
aws eks create-pod-identity-association --cluster-name $CLUSTER \
  --namespace muster-system --service-account muster-controller \
  --role-arn arn:aws:iam::123456789012:role/muster-controller-$CLUSTER
kubectl -n muster-system rollout status deployment/muster-controller
kubectl -n muster get pods
```

The role trusts `system:serviceaccount:muster-system:muster` (right).
"#;

#[test]
fn a_wrong_name_is_reported_with_its_line_and_the_chart_s_name() {
    let (mismatches, found) = check("docs/wrong.md", WRONG);
    let got: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "docs/wrong.md:9: ServiceAccount muster-system/muster-controller is not what the chart \
             creates (release muster in muster-system): it creates ServiceAccount muster-system/muster",
            "docs/wrong.md:11: Deployment muster-system/muster-controller is not what the chart \
             creates (release muster in muster-system): it creates Deployment muster-system/muster",
            "docs/wrong.md:12: namespace muster is neither the chart's (release muster in \
             muster-system) nor one the guide creates",
        ],
        "{got:#?}"
    );
    // the right name of the prose is found and passes
    assert!(found.contains(&Use::Object {
        kind: Kind::ServiceAccount,
        namespace: Some("muster-system".into()),
        name: "muster".into(),
    }));
    // another release name: the chart's names follow it
    let renamed = WRONG
        .replace("--install muster charts", "--install gpu charts")
        .replace("deployment/muster-controller", "deployment/gpu-muster");
    let (mismatches, _) = check("docs/renamed.md", &renamed);
    let got: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    assert!(
        got.iter().any(|m| m.starts_with(
            "docs/renamed.md:15: ServiceAccount muster-system/muster is not what the chart creates \
             (release gpu in muster-system): it creates ServiceAccount muster-system/gpu-muster"
        )),
        "{got:#?}"
    );
    assert!(!got.iter().any(|m| m.contains("Deployment")), "{got:#?}");
}

#[test]
fn values_files_and_sets_reach_the_render() {
    // a values file the guide writes sets the ServiceAccount's name
    let text = r#"```sh
cat > v.yaml <<EOF
clusterName: $CLUSTER
serviceAccount:
  name: $SA_NAME
EOF
export SA_NAME=ignored
helm install muster charts/muster -n ops --values v.yaml
kubectl -n ops get serviceaccount sa-name
```
"#;
    let (mismatches, _) = check("docs/values.md", text);
    assert!(mismatches.is_empty(), "{mismatches:?}");
    // without the file the install is reported, not guessed
    let (mismatches, _) = check(
        "docs/values.md",
        &text.replace("cat > v.yaml", "cat > w.yaml"),
    );
    assert!(
        mismatches
            .iter()
            .any(|m| m.line == 8 && m.message.contains("values file v.yaml is not written")),
        "{mismatches:?}"
    );
    // the guide's own required value missing: the render fails with the chart's message
    let (mismatches, _) = check(
        "docs/values.md",
        "```sh\nhelm install muster charts/muster -n ops\n```\n",
    );
    assert!(
        mismatches
            .iter()
            .any(|m| m.line == 2 && m.message.contains("clusterName is required")),
        "{mismatches:?}"
    );
}
