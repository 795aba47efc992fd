//! The one way commands write what they produce: standard output, standard
//! error and output files (`-o`, `--svg`).
//!
//! * Standard output: a closed pipe (`zae-limiter … | head -c1`) ends the
//!   output quietly and the command keeps the exit code it decided on (a
//!   `cooldown check` that says "wait" still exits 75; an invalid manifest still
//!   exits 1). Any other write error (`> /dev/full`) is exit 1 with a message.
//!   Nothing panics.
//! * Standard error: best effort; a failure to write a warning is ignored.
//! * Files: a regular file (or a path that does not exist yet) is written
//!   whole or not at all (a sibling temporary file renamed into place); a
//!   symlink is followed to its target; anything that is not a regular file
//!   (a FIFO, `/dev/null`, a terminal) and an open descriptor (`/dev/stdout`,
//!   `/dev/fd/N`) is written through in place, never replaced, and a reader
//!   that left ends it quietly.
//! * An output file that is one of the command's inputs (`-o` naming the
//!   manifest `-f` reads, `--svg` naming the trace, `-o` naming the local
//!   store) is refused before any work: [`refuse_overwriting_inputs`]; so is
//!   standard input (`-`) named as two inputs: [`one_stdin`].

use std::borrow::Cow;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::CliError;

/// The error for a failed write to standard output that is not a closed pipe.
fn stdout_failed(e: io::Error) -> CliError {
    CliError::Failed(format!("cannot write to standard output: {e}"))
}

/// Maps the result of a write to standard output: a closed pipe is not an error.
fn settle_stdout(result: io::Result<()>) -> Result<(), CliError> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(stdout_failed(e)),
    }
}

/// Writes `text` to standard output and flushes it.
pub fn print(text: impl AsRef<[u8]>) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    settle_stdout(out.write_all(text.as_ref()).and_then(|()| out.flush()))
}

/// Writes `text` and a newline to standard output.
pub fn println(text: impl AsRef<str>) -> Result<(), CliError> {
    let text = text.as_ref();
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    print(line)
}

/// Writes one JSON document, pretty-printed, and a newline to standard output.
pub fn print_json(doc: &serde_json::Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(doc)
        .map_err(|e| CliError::Failed(format!("cannot render JSON: {e}")))?;
    println(text)
}

/// The text (as is) or the JSON document (pretty) `format` asks for.
pub fn text_or_json(
    format: super::args::TextOrJson,
    text: impl FnOnce() -> String,
    json: impl FnOnce() -> serde_json::Value,
) -> Result<(), CliError> {
    match format {
        super::args::TextOrJson::Text => print(text()),
        super::args::TextOrJson::Json => print_json(&json()),
    }
}

/// Streams to standard output through a buffer: `write` stops at the first
/// error (a closed pipe ends the output quietly).
pub fn stream(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), CliError> {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    settle_stdout(write(&mut out).and_then(|()| out.flush()))
}

/// Writes `text` to standard error, ignoring failures (a warning that cannot
/// be shown must not turn into a crash).
pub fn eprint(text: impl AsRef<str>) {
    let _ = io::stderr().lock().write_all(text.as_ref().as_bytes());
}

/// [`eprint`] with a newline.
pub fn eprintln(text: impl AsRef<str>) {
    let _ = writeln!(io::stderr().lock(), "{}", text.as_ref());
}

/// A file a command names on its command line, for [`refuse_overwriting_inputs`]:
/// the flag that names it (`-f/--file`; one ending in `=` takes its value
/// attached, `--local=`), what it holds (`the manifest`), the file and the
/// path the flag was given (the same, except for files kept beside it, such
/// as the local store's journals).
#[derive(Debug, Clone)]
pub struct FileArg<'a> {
    pub flag: &'a str,
    pub what: &'a str,
    pub path: Cow<'a, Path>,
    pub given: Cow<'a, Path>,
}

impl<'a> FileArg<'a> {
    pub fn new(flag: &'a str, what: &'a str, path: impl Into<Cow<'a, Path>>) -> Self {
        let path = path.into();
        FileArg {
            flag,
            what,
            given: path.clone(),
            path,
        }
    }

    /// The flag with its value, as it was written: `-f/--file q.yaml`, `--local=a.sqlite`.
    fn shown(&self) -> String {
        let sep = if self.flag.ends_with('=') { "" } else { " " };
        let stdin = if self.given.as_os_str() == "-" {
            ", standard input"
        } else {
            ""
        };
        format!("{}{sep}{}{stdin}", self.flag, self.given.display())
    }
}

/// Refuses (a usage error, before anything is read or written) an output
/// file that is the same file as one of the command's inputs: writing it
/// would replace the manifest, trace or store the command reads. "Same"
/// means the same device and inode when both exist (hard links and symlinks
/// included), else the same place once the directory and symlinks are
/// resolved. Standard input (`-`) counts as the file it was redirected from
/// (`-f - -o m.yaml < m.yaml`); a FIFO or device is written through in
/// place, never replaced, so it is let through.
pub fn refuse_overwriting_inputs(
    outputs: &[FileArg<'_>],
    inputs: &[FileArg<'_>],
) -> Result<(), CliError> {
    for out in outputs {
        let Some(out_id) = file_id(&out.path) else {
            continue;
        };
        for input in inputs {
            if input_id(&input.path).as_ref() == Some(&out_id) {
                return Err(CliError::Usage(format!(
                    "{} is {} ({}): writing {} there would overwrite it. Give {} another path; nothing was written",
                    out.shown(),
                    input.what,
                    input.shown(),
                    out.what,
                    out.flag,
                )));
            }
        }
    }
    Ok(())
}

/// Refuses (a usage error) a command line that names standard input (`-`)
/// as more than one of its inputs: it can be read once.
pub fn one_stdin(inputs: &[FileArg<'_>]) -> Result<(), CliError> {
    let stdin: Vec<&FileArg<'_>> = inputs
        .iter()
        .filter(|i| i.path.as_os_str() == "-")
        .collect();
    match stdin.as_slice() {
        [] | [_] => Ok(()),
        [first, ..] if stdin.iter().all(|i| i.flag == first.flag) => Err(CliError::Usage(format!(
            "standard input (-) is given {} times as {}, and it can be read only once: pass one -, the others as files",
            stdin.len(),
            first.what
        ))),
        _ => Err(CliError::Usage(format!(
            "{} {} name standard input, and it can be read only once: pass one of them as -, the others as files",
            stdin
                .iter()
                .map(|i| i.flag)
                .collect::<Vec<_>>()
                .join(" -, ")
                + " -",
            if stdin.len() == 2 { "both" } else { "all" }
        ))),
    }
}

/// Which file a path names, for [`refuse_overwriting_inputs`]; `None` for
/// what a write never replaces (a FIFO, a device, a directory) or a path that
/// cannot be resolved (the write or read then fails with its own message).
#[derive(Debug, PartialEq, Eq)]
enum FileId {
    /// An existing regular file.
    Inode { dev: u64, ino: u64 },
    /// A file that does not exist yet: its would-be directory, resolved, and name.
    Missing(PathBuf),
}

/// [`file_id`] of an input; `-` is standard input, a regular file when the
/// shell redirected one.
fn input_id(path: &Path) -> Option<FileId> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    if path.as_os_str() != "-" {
        return file_id(path);
    }
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(stdin).metadata().ok()?;
    meta.is_file().then(|| FileId::Inode {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let target = match landing(path).ok()? {
        // The kernel resolves a descriptor's link to what it has open.
        Landing::Descriptor => path.to_path_buf(),
        Landing::Path(target) => target,
    };
    match std::fs::metadata(&target) {
        Ok(meta) if meta.is_file() => Some(FileId::Inode {
            dev: meta.dev(),
            ino: meta.ino(),
        }),
        Ok(_) => None,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let name = target.file_name()?;
            let dir = match target.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let dir = std::fs::canonicalize(dir).or_else(|_| std::path::absolute(dir));
            Some(FileId::Missing(dir.ok()?.join(name)))
        }
        Err(_) => None,
    }
}

/// How many symlinks are followed before a path is given up on (as the kernel does).
const MAX_SYMLINKS: usize = 40;

/// Writes the file at `path` with `write`: see the module doc for how each
/// kind of path is treated. Errors name the path.
pub fn write_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), CliError> {
    let cant = |e: io::Error| CliError::Failed(format!("cannot write {}: {e}", path.display()));
    let target = match landing(path).map_err(cant)? {
        // An open descriptor (`/dev/stdout`, `/dev/fd/3`), whatever it is
        // open on: the link's text is no path to replace (`pipe:[…]`), and a
        // file the shell opened must get the output in the descriptor it holds.
        Landing::Descriptor => return write_through(path, Open::Append, write).map_err(cant),
        Landing::Path(target) => target,
    };
    match std::fs::metadata(&target) {
        Ok(meta) if meta.is_dir() => Err(cant(io::Error::other("it is a directory"))),
        Ok(meta) if !meta.is_file() => write_through(&target, Open::InPlace, write).map_err(cant),
        Ok(meta) => write_atomically(&target, Some(meta.permissions()), write).map_err(cant),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            write_atomically(&target, None, write).map_err(cant)
        }
        Err(e) => Err(cant(e)),
    }
}

/// Where a write to a path lands.
enum Landing {
    /// This path: symlinks resolved one hop at a time, so a link to a file
    /// that does not exist yet creates that file.
    Path(PathBuf),
    /// An open descriptor: the symlink chain reaches `/proc`
    /// (`/dev/stdout` → `/proc/self/fd/1`).
    Descriptor,
}

fn landing(path: &Path) -> io::Result<Landing> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if current.starts_with("/proc") {
                    return Ok(Landing::Descriptor);
                }
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(Landing::Path(current)),
        }
    }
    Err(io::Error::other(format!(
        "more than {MAX_SYMLINKS} symbolic links to follow"
    )))
}

/// How [`write_through`] opens its path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    /// A FIFO, a device node, a socket: as it is.
    InPlace,
    /// An open descriptor: appended to, so a file behind it keeps what the
    /// shell gave (`> log` empty, `>> log` its lines) and gets the output
    /// at its end, not over its start.
    Append,
}

/// Opens `path` as `how` says and writes it in place. A reader that left (a
/// closed pipe, as in `-o /dev/stdout | head`) ends the output quietly, as
/// on standard output.
fn write_through(
    path: &Path,
    how: Open,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .append(how == Open::Append)
        .open(path)?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        done => done,
    }
}

/// A regular file: written to a sibling temporary file, synced, renamed into
/// place (keeping the permissions of the file it replaces).
fn write_atomically(
    path: &Path,
    permissions: Option<std::fs::Permissions>,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        if let Some(p) = permissions {
            file.set_permissions(p)?;
        }
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_text(path: &Path, text: &str) -> Result<(), CliError> {
        write_file(path, |w| w.write_all(text.as_bytes()))
    }

    #[test]
    fn regular_files_are_replaced_whole_and_keep_their_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_text(&path, "one").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_text(&path, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // A failed write leaves the old content and no temporary file behind.
        let err = write_file(&path, |_| Err(io::Error::other("boom"))).unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn symlinks_are_followed_even_to_a_missing_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("real.txt", &link).unwrap();
        write_text(&link, "hello").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");
        // A loop is an error, not a hang.
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(write_text(&a, "x").is_err());
    }

    #[test]
    fn an_output_that_is_an_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.yaml");
        std::fs::write(&input, "x").unwrap();
        let arg = FileArg::new;
        let inputs = [arg("-f/--file", "the manifest", input.as_path())];
        let refused = |out: &Path| {
            let outputs = [FileArg::new("-o/--out", "the plan", out.to_path_buf())];
            refuse_overwriting_inputs(&outputs, &inputs).err()
        };
        // The same path, another spelling of it, a hard link, a symlink.
        let err = refused(&input).unwrap();
        assert!(matches!(err, CliError::Usage(_)), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("-o/--out") && msg.contains("-f/--file"),
            "{msg}"
        );
        assert!(
            msg.contains("in.yaml") && msg.contains("nothing was written"),
            "{msg}"
        );
        assert!(refused(&dir.path().join(".").join("in.yaml")).is_some());
        std::fs::hard_link(&input, dir.path().join("hard.yaml")).unwrap();
        assert!(refused(&dir.path().join("hard.yaml")).is_some());
        std::os::unix::fs::symlink("in.yaml", dir.path().join("link.yaml")).unwrap();
        assert!(refused(&dir.path().join("link.yaml")).is_some());
        // Another file, a file not there yet, standard input: let through.
        std::fs::write(dir.path().join("other.yaml"), "y").unwrap();
        assert!(refused(&dir.path().join("other.yaml")).is_none());
        assert!(refused(&dir.path().join("new.json")).is_none());
        let stdin = [arg("-f/--file", "the manifest", Path::new("-"))];
        assert!(refuse_overwriting_inputs(&[arg("-o", "x", Path::new("-"))], &stdin).is_ok());
        // An input that does not exist yet (a local store) and an output on it.
        let store = dir.path().join("new.sqlite");
        let inputs = [arg("--local", "the local store", store.as_path())];
        let outputs = [arg("-o/--output", "the manifest", store.as_path())];
        assert!(refuse_overwriting_inputs(&outputs, &inputs).is_err());
        // A device is written through in place, never replaced.
        let null = [arg("-f", "the manifest", Path::new("/dev/null"))];
        assert!(
            refuse_overwriting_inputs(&[arg("-o", "x", Path::new("/dev/null"))], &null).is_ok()
        );
    }

    #[test]
    fn standard_input_is_one_input_at_most() {
        let arg = FileArg::new;
        let (dash, file) = (Path::new("-"), Path::new("a.yaml"));
        assert!(one_stdin(&[arg("-f/--file", "m", dash), arg("--trace", "t", file)]).is_ok());
        let err = one_stdin(&[arg("-f/--file", "m", dash), arg("--trace", "t", dash)]).unwrap_err();
        assert!(matches!(err, CliError::Usage(_)), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("-f/--file -, --trace - both name standard input"),
            "{msg}"
        );
        let twice = [
            arg("FILE", "a manifest", dash),
            arg("FILE", "a manifest", dash),
        ];
        let err = one_stdin(&twice).unwrap_err().to_string();
        assert!(
            err.starts_with("standard input (-) is given 2 times as a manifest"),
            "{err}"
        );
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_text(dir.path(), "x").unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
    }
}
