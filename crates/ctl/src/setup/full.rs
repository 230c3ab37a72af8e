//! Setup's pages at a terminal: the loop that reads keys, moves between the
//! pages ([`super::pages`]), does the slow things (the model list, the
//! sign-in, the two test requests) and writes at the end through the same
//! step as `--plain` ([`super::write`]).
//!
//! Invariants: nothing is written before both tests passed and, for an
//! existing `.env`, the owner said yes; the screen is left (its guard
//! dropped) before anything is printed to the terminal's own screen; what
//! was written, or why nothing was, is printed there too, so it stays in the
//! scrollback; the test requests run on a thread while the pages show their
//! progress and Esc or Ctrl-C still gives up.
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use teneral_core::chatgpt::Tokens;

use super::ask::AskError;
use super::pages::{self, Key, Kind, Page, Step};
use super::probe::{self, Endpoint, ProbeError, Protocol};
use super::screen::{self, Facts, Input, Progress, Screen};
use super::{chatgpt, write, SetupError, OPENAI_URL};

/// How setup ended without an error.
enum Ended {
    Written(Vec<String>),
    /// Esc on the first page.
    Left,
    /// No to replacing `.env`.
    Declined,
}

/// Runs the pages for the individual at `home`; the exit status.
pub fn run(home: &Path, existing: Option<String>) -> Result<i32, SetupError> {
    let mut screen = Screen::enter().map_err(SetupError::Terminal)?;
    let var = |name: &str| std::env::var(name).ok();
    let facts = Facts {
        env_path: home.join(".env").display().to_string(),
        ascii: !crate::talk::theme::utf8_locale(&var),
        ..Facts::default()
    };
    let mut flow = Flow { home, existing, key: String::new(), tokens: None, facts, failure: None };
    let ended = flow.run(&mut screen);
    drop(screen);
    match ended? {
        Ended::Written(said) => {
            for line in said {
                println!("{line}");
            }
            Ok(0)
        }
        Ended::Left => {
            println!("Left setup; nothing was written.");
            Ok(0)
        }
        Ended::Declined => {
            println!("Nothing was written; .env is as it was.");
            Ok(0)
        }
    }
}

/// What the pages gathered so far.
struct Flow<'h> {
    home: &'h Path,
    existing: Option<String>,
    key: String,
    tokens: Option<Tokens>,
    facts: Facts,
    failure: Option<SetupError>,
}

/// What the test thread reports: which test (0 or 1) and how it stands.
type Report = (usize, Result<Option<String>, ProbeError>);

impl Flow<'_> {
    fn run(&mut self, screen: &mut Screen) -> Result<Ended, SetupError> {
        let mut page = Page::Provider { selected: 0 };
        loop {
            page = match page.kind() {
                Kind::SignIn => self.sign_in(screen)?,
                Kind::Tests => self.tests(screen)?,
                _ => page,
            };
            if matches!(page.kind(), Kind::SignIn | Kind::Tests) {
                continue;
            }
            screen.draw(&page, &self.facts).map_err(SetupError::Terminal)?;
            let key = match screen::read(None).map_err(SetupError::Terminal)? {
                Some(Input::Key(key)) => key,
                Some(Input::Resized) => {
                    screen.clear().map_err(SetupError::Terminal)?;
                    continue;
                }
                None => continue,
            };
            let kind = page.kind();
            page = match pages::key(&mut page, key) {
                Step::Stay => page,
                Step::Back => self.page(pages::back(&self.facts.provider, kind), screen)?,
                Step::Leave => return Ok(Ended::Left),
                Step::GiveUp => return Err(gave_up(kind)),
                Step::Provider(provider) => {
                    self.facts.provider = provider.to_owned();
                    self.after(kind, screen)?
                }
                Step::Answer(value) => {
                    match kind {
                        Kind::Address => self.facts.address = value,
                        Kind::Key => self.key = value,
                        _ => self.facts.model = value,
                    }
                    self.after(kind, screen)?
                }
                Step::Replace(true) => self.write(),
                Step::Replace(false) => return Ok(Ended::Declined),
                Step::Close => {
                    return match self.failure.take() {
                        Some(failure) => Err(failure),
                        None => Ok(Ended::Written(std::mem::take(&mut self.facts.said))),
                    }
                }
            };
        }
    }

    /// The page after `from`; writes when that is the last page.
    fn after(&mut self, from: Kind, screen: &mut Screen) -> Result<Page, SetupError> {
        let to = pages::next(&self.facts.provider, from, self.existing.is_some());
        if to == Kind::Replace {
            let settings = super::settings_for(&self.facts.provider, self.endpoint().as_ref());
            self.facts.replace = write::shown(&settings);
        }
        if to == Kind::Ended {
            return Ok(self.write());
        }
        self.page(to, screen)
    }

    /// A fresh page of `kind`, with what was typed before.
    fn page(&mut self, kind: Kind, screen: &mut Screen) -> Result<Page, SetupError> {
        let problem = None;
        Ok(match kind {
            Kind::Provider => {
                let selected = pages::PROVIDERS
                    .iter()
                    .position(|(p, _)| *p == self.facts.provider)
                    .unwrap_or(0);
                Page::Provider { selected }
            }
            Kind::Address => {
                let text = match (self.facts.address.is_empty(), self.facts.provider.as_str()) {
                    (true, "openai") => OPENAI_URL.to_owned(),
                    _ => self.facts.address.clone(),
                };
                Page::Address { text, problem }
            }
            Kind::Key => Page::Key { text: self.key.clone(), problem },
            Kind::Model => {
                let mut page = Page::Model {
                    options: Vec::new(),
                    selected: 0,
                    typed: String::new(),
                    problem: None,
                };
                self.facts.busy = Some(format!("Asking {} for its models …", self.facts.address));
                screen.draw(&page, &self.facts).map_err(SetupError::Terminal)?;
                self.facts.busy = None;
                let (key, account) = match &self.tokens {
                    Some(t) => (t.access_token.clone(), Some(t.account_id.clone())),
                    None => (self.key.clone(), None),
                };
                let listed =
                    probe::Client::new()?.models(&self.facts.address, &key, account.as_deref());
                if let (Page::Model { options, selected, .. }, Some(ids)) = (&mut page, listed) {
                    *selected = ids.iter().position(|m| *m == self.facts.model).unwrap_or(0);
                    *options = ids;
                }
                page
            }
            Kind::SignIn => Page::SignIn,
            Kind::Tests => Page::Tests,
            Kind::Replace => Page::Replace,
            Kind::Ended => Page::Ended,
        })
    }

    /// The endpoint the answers make (`None` for the stand-in).
    fn endpoint(&self) -> Option<Endpoint> {
        let (protocol, key, account) = match (self.facts.provider.as_str(), &self.tokens) {
            ("standin", _) => return None,
            ("chatgpt", Some(t)) => {
                (Protocol::Responses, t.access_token.clone(), Some(t.account_id.clone()))
            }
            ("openai", _) => (Protocol::Responses, self.key.clone(), None),
            _ => (Protocol::Chat, self.key.clone(), None),
        };
        Some(Endpoint {
            protocol,
            base_url: self.facts.address.clone(),
            key,
            model: self.facts.model.clone(),
            account,
        })
    }

    /// The last page, having written, or saying why nothing was.
    fn write(&mut self) -> Page {
        let settings = super::settings_for(&self.facts.provider, self.endpoint().as_ref());
        match write::settings(self.home, self.existing.clone(), &settings, self.tokens.as_ref()) {
            Ok(said) => self.facts.said = said,
            Err(e) => return self.fail(e),
        }
        Page::Ended
    }

    fn fail(&mut self, e: SetupError) -> Page {
        self.facts.failure =
            Some(e.to_string().trim_end_matches("; nothing was written").to_owned());
        self.failure = Some(e);
        Page::Ended
    }

    /// The sign-in page: waits for the browser, then for the tokens; the
    /// model page after it.
    fn sign_in(&mut self, screen: &mut Screen) -> Result<Page, SetupError> {
        let pending = match chatgpt::begin() {
            Ok(pending) => pending,
            Err(e) => return Ok(self.fail(e.into())),
        };
        self.facts.url = Some((pending.url.clone(), pending.port));
        screen.draw(&Page::SignIn, &self.facts).map_err(SetupError::Terminal)?;
        let facts = &self.facts;
        let called = pending.wait(|| loop {
            match screen::read(Some(Duration::ZERO)) {
                Ok(Some(Input::Key(Key::Esc | Key::CtrlC))) | Err(_) => return true,
                Ok(Some(Input::Resized)) => {
                    let _ = screen.clear();
                    let _ = screen.draw(&Page::SignIn, facts);
                }
                Ok(Some(Input::Key(_))) => {}
                Ok(None) => return false,
            }
        });
        let called = match called {
            Ok(called) => called,
            Err(e @ chatgpt::SignInError::GaveUp) => return Err(e.into()),
            Err(e) => return Ok(self.fail(e.into())),
        };
        self.facts.busy = Some("Signed in; asking for the tokens …".to_owned());
        screen.draw(&Page::SignIn, &self.facts).map_err(SetupError::Terminal)?;
        self.facts.busy = None;
        match called.exchange() {
            Ok(tokens) => self.tokens = Some(tokens),
            Err(e) => return Ok(self.fail(e.into())),
        }
        self.facts.address = std::env::var(chatgpt::URL_VARIABLE)
            .unwrap_or_else(|_| teneral_core::chatgpt::BACKEND_URL.to_owned())
            .trim_end_matches('/')
            .to_owned();
        self.page(Kind::Model, screen)
    }

    /// The tests page: both requests on a thread, their progress drawn.
    fn tests(&mut self, screen: &mut Screen) -> Result<Page, SetupError> {
        let Some(endpoint) = self.endpoint() else { return Ok(self.write()) };
        let (tx, rx) = mpsc::channel::<Report>();
        std::thread::spawn(move || probe_both(&endpoint, &tx));
        self.facts.tests = [Progress::Running, Progress::Waiting];
        loop {
            screen.draw(&Page::Tests, &self.facts).map_err(SetupError::Terminal)?;
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((i, Ok(None))) => self.facts.tests[i] = Progress::Running,
                Ok((i, Ok(Some(said)))) => {
                    self.facts.tests[i] = Progress::Passed(said);
                    if i == 1 {
                        return self.after(Kind::Tests, screen);
                    }
                }
                Ok((i, Err(e))) => {
                    self.facts.tests[i] = Progress::Failed(e.to_string());
                    return Ok(self.fail(e.into()));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let e = ProbeError::Empty { test: "tool" };
                    return Ok(self.fail(e.into()));
                }
            }
            match screen::read(Some(Duration::ZERO)).map_err(SetupError::Terminal)? {
                Some(Input::Key(Key::Esc | Key::CtrlC)) => return Err(gave_up(Kind::Tests)),
                Some(Input::Resized) => screen.clear().map_err(SetupError::Terminal)?,
                _ => {}
            }
        }
    }
}

/// The two tests, one after the other, reported as they go.
fn probe_both(endpoint: &Endpoint, tx: &mpsc::Sender<Report>) {
    let client = match probe::Client::new() {
        Ok(client) => client,
        Err(e) => {
            let _ = tx.send((0, Err(e)));
            return;
        }
    };
    match client.text_test(endpoint) {
        Ok(words) => {
            let shown: String = words.chars().take(120).collect();
            let _ = tx.send((0, Ok(Some(format!("answered in words: {shown:?}")))));
        }
        Err(e) => {
            let _ = tx.send((0, Err(e)));
            return;
        }
    }
    let _ = tx.send((1, Ok(None)));
    let said = client.tool_test(endpoint).map(|name| Some(format!("called the tool {name}")));
    let _ = tx.send((1, said));
}

/// Giving up on the page of `kind`, in words.
fn gave_up(kind: Kind) -> SetupError {
    let what = match kind {
        Kind::Provider => "the provider",
        Kind::Address => "the address",
        Kind::Key => "the key",
        Kind::Model => "the model",
        Kind::Tests => "the test requests",
        _ => "the last page",
    };
    SetupError::Ask(AskError::GaveUp { what: what.to_owned() })
}
