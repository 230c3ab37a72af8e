//! Credential shapes: text that looks like a credential whoever it belongs
//! to. Each finder takes one line and answers the first match's rule and the
//! matched text. Pure, no allocation until something is found; each rule is
//! gated by a cheap literal search so that an ordinary line costs a few
//! passes of `memchr`-speed searching.

use super::Rule;

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether the match at `at` starts a word (nothing word-like before it).
fn starts_word(line: &[u8], at: usize) -> bool {
    at == 0 || !is_word(line[at - 1])
}

/// The length of the run from `from` of bytes `ok` accepts.
fn run(line: &[u8], from: usize, ok: impl Fn(u8) -> bool) -> usize {
    line[from..].iter().take_while(|&&b| ok(b)).count()
}

fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Every occurrence of `needle` in `line`.
fn each<'a>(line: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    line.match_indices(needle).map(|(i, _)| i)
}

/// Which bytes occur in a line: one pass, so that a rule whose literal
/// bytes are absent is not searched for at all.
struct Present([bool; 256]);

impl Present {
    fn of(line: &str) -> Present {
        let mut seen = [false; 256];
        for &b in line.as_bytes() {
            seen[usize::from(b)] = true;
        }
        Present(seen)
    }

    fn all(&self, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.0[usize::from(b)])
    }
}

/// A rule's search of one line.
type Finder = fn(&str) -> Option<(Rule, &str)>;

/// The first credential shape in `line`, with the text that matched.
pub fn find(line: &str) -> Option<(Rule, &str)> {
    let p = Present::of(line);
    let quote = p.all(b"\"") || p.all(b"'") || p.all(b"`");
    let rules: [(bool, Finder); 8] = [
        (p.all(b"-BPK"), private_key),
        (p.all(b"g_"), github),
        (p.all(b"sk-"), sk_key),
        (p.all(b"AKI") || p.all(b"ASI"), aws),
        (p.all(b"xo-"), slack),
        (p.all(b"eyJ."), jwt),
        (p.all(b":/@"), url_password),
        (quote && (p.all(b"=") || p.all(b":")), assignment),
    ];
    rules.iter().filter(|(open, _)| *open).find_map(|(_, rule)| rule(line))
}

fn private_key(line: &str) -> Option<(Rule, &str)> {
    let at = line.find("-----BEGIN ")?;
    let rest = &line[at + 11..];
    let end = rest.find("-----")?;
    rest[..end]
        .contains("PRIVATE KEY")
        .then(|| (Rule::PrivateKeyHeader, &line[at..at + 11 + end + 5]))
}

fn github(line: &str) -> Option<(Rule, &str)> {
    let b = line.as_bytes();
    for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
        for at in each(line, prefix) {
            let n = run(b, at + 4, |c| c.is_ascii_alphanumeric());
            if starts_word(b, at) && n >= 36 {
                return Some((Rule::GithubToken, &line[at..at + 4 + n]));
            }
        }
    }
    for at in each(line, "github_pat_") {
        let n = run(b, at + 11, is_word);
        if starts_word(b, at) && n >= 22 {
            return Some((Rule::GithubToken, &line[at..at + 11 + n]));
        }
    }
    None
}

fn sk_key(line: &str) -> Option<(Rule, &str)> {
    let b = line.as_bytes();
    for at in each(line, "sk-") {
        let n = run(b, at + 3, token_byte);
        let body = &b[at + 3..at + 3 + n];
        let digits = body.iter().filter(|c| c.is_ascii_digit()).count();
        if starts_word(b, at) && n >= 20 && digits >= 2 {
            return Some((Rule::OpenAiKey, &line[at..at + 3 + n]));
        }
    }
    None
}

fn aws(line: &str) -> Option<(Rule, &str)> {
    let b = line.as_bytes();
    for prefix in ["AKIA", "ASIA"] {
        for at in each(line, prefix) {
            let n = run(b, at + 4, |c| c.is_ascii_uppercase() || c.is_ascii_digit());
            let ends = b.get(at + 4 + n).is_none_or(|&c| !is_word(c));
            if starts_word(b, at) && n == 16 && ends {
                return Some((Rule::AwsKeyId, &line[at..at + 20]));
            }
        }
    }
    None
}

fn slack(line: &str) -> Option<(Rule, &str)> {
    let b = line.as_bytes();
    for at in each(line, "xox") {
        let Some(&kind) = b.get(at + 3) else { continue };
        if !b"abprse".contains(&kind) || b.get(at + 4) != Some(&b'-') {
            continue;
        }
        let n = run(b, at + 5, |c| c.is_ascii_alphanumeric() || c == b'-');
        if starts_word(b, at) && n >= 10 {
            return Some((Rule::SlackToken, &line[at..at + 5 + n]));
        }
    }
    None
}

fn jwt(line: &str) -> Option<(Rule, &str)> {
    let b = line.as_bytes();
    let seg = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    for at in each(line, "eyJ") {
        let one = run(b, at, seg);
        if !starts_word(b, at) || one < 10 || b.get(at + one) != Some(&b'.') {
            continue;
        }
        let two_at = at + one + 1;
        let two = run(b, two_at, seg);
        if two < 10 || !b[two_at..].starts_with(b"eyJ") || b.get(two_at + two) != Some(&b'.') {
            continue;
        }
        let three = run(b, two_at + two + 1, seg);
        if three >= 10 {
            return Some((Rule::Jwt, &line[at..two_at + two + 1 + three]));
        }
    }
    None
}

fn url_password(line: &str) -> Option<(Rule, &str)> {
    for at in each(line, "://") {
        let b = line.as_bytes();
        let scheme = b[..at].iter().rev().take_while(|c| c.is_ascii_alphanumeric()).count();
        let end =
            at + 3 + run(b, at + 3, |c| !c.is_ascii_whitespace() && !b"/\"'`<>?#".contains(&c));
        let authority = &line[at + 3..end];
        let Some(userinfo) = authority.rsplit_once('@').map(|(u, _)| u) else { continue };
        let Some((_, password)) = userinfo.split_once(':') else { continue };
        let placeholder = password.starts_with(['$', '{', '<', '*', '%']);
        if scheme > 0 && !password.is_empty() && !placeholder {
            return Some((Rule::UrlPassword, &line[at - scheme..end]));
        }
    }
    None
}

/// Suffixes of a name that says it holds a secret.
const SECRET_WORDS: [&str; 7] =
    ["key", "token", "secret", "password", "passwd", "credential", "credentials"];

/// Whether `name` (an identifier) says it holds a secret: it ends with one
/// of [`SECRET_WORDS`] at a word boundary (`api_key`, `apiKey`, `API_KEY`,
/// not `monkey`), or says secret, token or password anywhere.
pub fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if ["secret", "token", "password"].iter().any(|w| lower.contains(w)) {
        return true;
    }
    SECRET_WORDS.iter().any(|w| {
        lower.ends_with(w) && {
            let at = lower.len() - w.len();
            let (before, first) = (name.as_bytes().get(at.wrapping_sub(1)), name.as_bytes()[at]);
            at == 0
                || before.is_some_and(|c| !c.is_ascii_alphanumeric())
                || first.is_ascii_uppercase()
        }
    })
}

/// A quoted literal of 16 or more characters without blanks, assigned
/// (`=`, `:`, `:=`, `=>`) to a name [`secret_name`] accepts.
fn assignment(line: &str) -> Option<(Rule, &str)> {
    let b = line.as_bytes();
    let mut from = 0;
    while let Some(open) = b[from..].iter().position(|c| b"\"'`".contains(c)).map(|i| i + from) {
        let quote = b[open];
        let len = b[open + 1..].iter().position(|&c| c == quote)?;
        let value = &line[open + 1..open + 1 + len];
        from = open + len + 2;
        let plain = !value.bytes().any(|c| c.is_ascii_whitespace());
        let placeholder = value.starts_with(['$', '{', '<', '%']);
        if value.len() < 16 || !plain || placeholder {
            continue;
        }
        let before = line[..open].trim_end();
        let Some(before) = before
            .strip_suffix(":=")
            .or_else(|| before.strip_suffix("=>"))
            .or_else(|| before.strip_suffix('='))
            .or_else(|| before.strip_suffix(':'))
        else {
            continue;
        };
        let before = before.trim_end().trim_end_matches(['"', '\'']);
        let start = before
            .bytes()
            .rposition(|c| !(c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.'))
            .map_or(0, |i| i + 1);
        let name = &before[start..];
        if !name.is_empty() && secret_name(name) {
            return Some((Rule::SecretAssignment, value));
        }
    }
    None
}
