//! Opening a run's job: refusing a run that overlaps a live one, deciding the schema (given,
//! inferred, or the job's own), opening the lake and the [`Coordinator`], taking the inputs
//! from the lake's ledger, and checking that every input is still what the job (or the job
//! it took the input from) read. What comes out is a [`JobRun`] ready to write from its
//! position, or the summary of a job that has nothing more to do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::Schema;

use super::bad_records::{self, BadRecords};
use super::plan::IngestPlan;
use super::rules::{
    check_not_inside_a_sink, check_output_columns, check_partition_columns, check_same_job,
    default_job_name, describe_schema, infer_from_inputs, legacy_read,
};
use super::source::{
    self, check_read, Cursor, Input, PartOffsets, Prefix, SourcePosition, StdinRecords,
};
use super::{
    compaction, json_types, ledger, CustomSource, IngestStatus, IngestSummary, Observer, Output,
    StageTimes, Step,
};
use crate::error::{Error, Result};
use crate::job::manifest::{self, Manifest};
use crate::job::{Coordinator, Ownership};
use crate::maintain::CompactOptions;
use crate::sink::Sink;
use crate::storage::{LocalStorage, Storage};
use crate::table::delta::DeltaOptions;

/// What opening a job gave.
pub(super) enum Opened {
    /// The job had finished, and nothing it reads has grown: nothing to do.
    Finished(Box<IngestSummary>),
    /// The job is open and holds its inputs: ready to write from `position`.
    Ready(Box<JobRun>),
}

/// A job open for this run, and where it stands.
pub(super) struct JobRun {
    pub(super) plan: IngestPlan,
    pub(super) storage: Arc<dyn Storage>,
    pub(super) sink: Sink,
    pub(super) coordinator: Coordinator,
    /// The records' schema.
    pub(super) schema: Schema,
    /// Where the run starts: the restored checkpoint's position, or a new job's start.
    pub(super) position: SourcePosition,
    /// Whether the job had a checkpoint.
    pub(super) resumed: bool,
    /// Records standard input's inference read, handed to the source.
    pub(super) stdin_prefix: Option<StdinRecords>,
    /// The job had finished before this run (it reads again what grew).
    pub(super) finished_before: bool,
    /// A finished job's stream is read again, to tell whether it brings more.
    pub(super) rereads_stream: bool,
    /// A finished job's files grew or changed, so it was reopened.
    pub(super) files_grew: bool,
    /// Records and bad records the restored checkpoint had counted.
    pub(super) counted_before: (u64, u64),
    pub(super) bad_file: BadRecords,
    /// When schema inference began: a new job's first records are due one interval later.
    pub(super) inference_began: Instant,
    /// Background compaction still to start, once the table exists.
    pub(super) compact: Option<(CompactOptions, Duration)>,
}

/// The schema a new job would take, from before the job was opened.
struct Fresh {
    /// The given one, else inferred from the inputs (the first with records); an error
    /// stops a new job only.
    schema: Result<Schema>,
    /// Standard input's records that inference read.
    stdin_prefix: Option<StdinRecords>,
    /// The job has not decided its schema yet (`undecided_schema`).
    undecided: bool,
}

/// What the job's restored checkpoint says, and what checking the inputs against it found.
struct Resume {
    restored: Option<SourcePosition>,
    /// The position is of an older filesink, which recorded no read prefixes.
    legacy: bool,
    finished_before: bool,
    files_grew: bool,
}

impl JobRun {
    /// Opens `plan`'s job (see the module doc).
    pub(super) async fn open(
        mut plan: IngestPlan,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<Opened> {
        if let Some(nothing) = survey_inputs(&mut plan, observer).await? {
            return Ok(Opened::Finished(Box::new(nothing)));
        }
        for input in &mut plan.inputs {
            input.find_compression().await?;
        }
        let early = early_storage(&plan).await?;
        // Standard input takes what arrived by the first checkpoint's deadline for inference
        // (which counts from here: the records a stream's inference waited for are due then).
        let inference_began = Instant::now();
        let mut fresh = Fresh::of(&plan, early.as_deref(), inference_began).await?;
        let storage: Arc<dyn Storage> = match early {
            Some(s) => s,
            None => {
                // No lake, so no job to resume: the job is new, and an inference error stops
                // it now, before anything is created.
                fresh.schema = Ok(fresh.schema?);
                match &plan.output {
                    Output::Local(p) => {
                        check_not_inside_a_sink(p)?;
                        Arc::new(LocalStorage::new(p)?) as Arc<dyn Storage>
                    }
                    Output::Storage(s) => s.clone(),
                }
            }
        };
        // A resumed job keeps its writers: the budget and the open files are shared among
        // those, not among the writers a new job would have had here.
        let latest = manifest::latest_manifest(storage.as_ref(), &plan.job, None).await?;
        if let Some(m) = &latest {
            same_job_as(&plan, m)?;
        }
        if let (None, Some(m)) = (plan.parallelism, &latest) {
            plan.share_among(m.writers.len());
        }
        let sink = build_sink(&plan, &storage)?;
        let (table, table_schema) =
            table_options(&mut plan, latest.as_ref(), &storage, &mut fresh.schema).await?;
        // The coordinator reads the manifest again as it restores: not two at once.
        drop(latest);
        *step = Step::Open;
        let mut builder =
            Coordinator::builder(&sink, &plan.job).ownership(Ownership::Lease(plan.lease));
        if let Some(options) = table {
            builder = builder.delta_table(options);
        }
        let mut coordinator = match plan.parallelism {
            Some(n) => builder.parallelism(n),
            None => builder.parallelism_of_new_job(plan.writers),
        }
        .open()
        .await?;
        *step = Step::Prepare;
        let (taken, bases) = take_inputs(&mut plan, &storage, observer).await?;
        let resume = Resume::check(&plan, &mut coordinator, &taken, observer).await?;
        let Resume {
            restored,
            legacy,
            finished_before,
            files_grew,
        } = resume;
        // A stream cannot be looked at without reading it: a finished job reads it again. It
        // must begin with what the job read (else `Error::InputChanged`), and what follows is
        // new; one that brings nothing more leaves the job finished as it was, no checkpoint.
        // (Not reading it would drop whatever a rerun with more input piped in.)
        // A terminal is not read again: nobody pipes records into a finished job from one.
        // So is a custom source: it is sought to where the job finished.
        let rereads_stream = finished_before
            && (plan.custom.is_some()
                || restored.as_ref().is_some_and(|p| !p.read.is_empty())
                    && plan.inputs.iter().any(|i| {
                        i.is_stdin()
                            && (i.stream.is_some()
                                || !std::io::IsTerminal::is_terminal(&std::io::stdin()))
                    }));
        if rereads_stream {
            coordinator.reopen();
        }
        seek_custom(&mut plan, restored.as_ref(), &bases).await?;
        if coordinator.is_finished() {
            let table_exists = coordinator.table_version().is_some();
            let last_checkpoint = coordinator.last_checkpoint();
            let summary = already_finished(
                &mut plan,
                &storage,
                table_exists,
                last_checkpoint,
                restored.as_ref(),
            )
            .await;
            return Ok(Opened::Finished(Box::new(summary)));
        }
        note_resumed(&plan, &coordinator, restored.as_ref(), observer);
        let Fresh {
            schema: fresh_schema,
            stdin_prefix,
            undecided,
            ..
        } = fresh;
        let schema = decide_schema(&plan, restored.as_ref(), fresh_schema, undecided, observer)?;
        if table_schema
            .as_ref()
            .is_some_and(|t| t.fields() != schema.fields())
        {
            return Err(Error::InvalidInput(format!(
                "job `{}` changed while this run opened it (its schema is not the one the \
                 table was opened with); run it again",
                plan.job
            )));
        }
        let bad_file = open_bad_records(&plan, &sink, restored.as_ref(), legacy, observer).await?;
        let position = start_position(&plan, restored.as_ref(), &taken, &schema);
        Ok(Opened::Ready(Box::new(JobRun {
            counted_before: restored
                .as_ref()
                .map_or((0, 0), |p| (p.records, p.bad_records)),
            resumed: restored.is_some(),
            compact: plan.compact.take(),
            plan,
            storage,
            sink,
            coordinator,
            schema,
            position,
            stdin_prefix,
            finished_before,
            rereads_stream,
            files_grew,
            bad_file,
            inference_began,
        })))
    }
}

/// A job named after its inputs reads only those the lake has something of to take
/// ([`ledger::survey`]): an input a finished job read to its end, unchanged since, is passed
/// over, and one changed within what the lake took is refused, named in the summary, while
/// the others are read. The job is then named after the inputs it reads, so that a cron run
/// over a glob whose files were all taken opens no job and writes nothing, and one that finds
/// one new file takes that file alone. Returns the summary of a run that has nothing to read.
/// A job named by the caller reads the inputs it was given, as given (so does one that compacts
/// in the background): a changed input refuses it (exit 7). Either is refused (exit 5) where a
/// live run of another job holds one of its inputs. Reads, writes nothing: a refusal leaves the
/// lake as it was.
async fn survey_inputs(
    plan: &mut IngestPlan,
    observer: &mut dyn Observer,
) -> Result<Option<IngestSummary>> {
    if plan.custom_name.is_some() || !plan.inputs.iter().any(ledger::is_ledgered) {
        return Ok(None);
    }
    let storage: Arc<dyn Storage> = match &plan.output {
        Output::Local(p) if !p.join(crate::protocol::METADATA_DIR).is_dir() => return Ok(None),
        Output::Local(p) => Arc::new(LocalStorage::new(p)?),
        Output::Storage(s) => s.clone(),
    };
    let standing = ledger::survey(storage.as_ref(), &plan.job, &plan.inputs).await?;
    // A job named by the caller (or compacting in the background, which is opened whatever
    // it reads: its rerun finishes a round its last run died in) reads its inputs as given:
    // the survey only refuses it, before anything is written.
    if plan.job_given || plan.compact.is_some() {
        for s in standing {
            if let ledger::Standing::Refused(e) | ledger::Standing::Busy(e) = s {
                return Err(e);
            }
        }
        return Ok(None);
    }
    let (mut keep, mut passed) = (Vec::with_capacity(plan.inputs.len()), 0usize);
    for (input, standing) in std::mem::take(&mut plan.inputs).into_iter().zip(standing) {
        match standing {
            ledger::Standing::New | ledger::Standing::Taken => keep.push(input),
            ledger::Standing::NothingNew => passed += 1,
            ledger::Standing::Refused(e) => {
                observer.note(&format!("refused: {e}"));
                plan.refused.push(e.to_string());
            }
            ledger::Standing::Busy(e) => return Err(e),
        }
    }
    plan.inputs = keep;
    if passed == 0 && plan.refused.is_empty() {
        return Ok(None);
    }
    let Some(job) = default_job_name(&plan.inputs) else {
        return Ok(Some(nothing_new(plan, passed)));
    };
    observer.note(&format!(
        "{passed} input(s) were read to their end before and did not change: job `{job}` reads \
         the other {}",
        plan.inputs.len()
    ));
    plan.rename(job);
    plan.unchanged = passed;
    Ok(None)
}

/// The summary of a run whose inputs hold nothing the lake has not taken (`passed` of them
/// unchanged, the others refused).
fn nothing_new(plan: &IngestPlan, passed: usize) -> IngestSummary {
    IngestSummary {
        job: plan.job.clone(),
        status: IngestStatus::AlreadyFinished,
        resumed: false,
        records: 0,
        records_total: 0,
        bad_records: 0,
        files: 0,
        bytes: 0,
        checkpoints: 0,
        input_bytes: 0,
        last_checkpoint: 0,
        stage_times: StageTimes::default(),
        compaction: None,
        skipped: Vec::new(),
        waiting: Vec::new(),
        unchanged: passed,
        refused: plan.refused.clone(),
    }
}

/// Refuses a run whose options differ from those its job was started with (the output format,
/// the inputs, their format, the partitioning), from the job's latest manifest, before the
/// job is taken: nothing is written, not even the job's lock.
fn same_job_as(plan: &IngestPlan, m: &Manifest) -> Result<()> {
    let job = &plan.job;
    if let Some(w) = m.writers.first() {
        if w.format != plan.format.name() {
            return Err(Error::InvalidInput(format!(
                "job `{job}` writes {}, not {}; give the same --format to resume it, or --job \
                 NAME to start a new job beside it",
                w.format,
                plan.format.name()
            )));
        }
    }
    if plan.custom_name.is_some() || m.source_position.is_null() {
        return Ok(());
    }
    let Ok(p) = SourcePosition::from_json(job, &m.source_position) else {
        return Ok(()); // the restore names what is wrong with it
    };
    check_same_job(
        job,
        &p,
        &plan.canonical(),
        plan.input_format,
        &plan.partition_by,
        plan.time_by.as_ref(),
    )
}

/// The lake's storage if it exists already, after refusing at once a run that overlaps a live
/// run of its job, before inference reads any input (standard input may never end); opening
/// the job decides for certain. A local directory that does not exist holds no job and is not
/// created yet.
async fn early_storage(plan: &IngestPlan) -> Result<Option<Arc<dyn Storage>>> {
    let early: Option<Arc<dyn Storage>> = match &plan.output {
        Output::Local(p) if !p.exists() => None,
        Output::Local(p) => Some(Arc::new(LocalStorage::new(p)?) as Arc<dyn Storage>),
        Output::Storage(s) => Some(s.clone()),
    };
    if let Some(storage) = &early {
        if let Some(holder) = storage.job_holder(&plan.job).await? {
            return Err(Error::job_busy(
                &plan.job,
                format!("{holder}; nothing was changed"),
            ));
        }
    }
    Ok(early)
}

impl Fresh {
    /// The schema a new job would take: the given one, else inferred from the inputs. A job
    /// that exists keeps its own: nothing to infer, and its standard input is read from the
    /// start by the source, which compares what the job read of it byte for byte (inference
    /// would take its first records first). So does a job that has not decided its schema yet:
    /// it takes the one inferred at its first run that sees records.
    async fn of(
        plan: &IngestPlan,
        early: Option<&dyn Storage>,
        inference_began: Instant,
    ) -> Result<Fresh> {
        let job = &plan.job;
        let new_job = match early {
            None => true,
            Some(s) => manifest::list_checkpoints(s, job).await?.is_empty(),
        };
        let undecided = match early {
            Some(s) if !new_job => peek_position(s, job)
                .await?
                .is_some_and(|p| undecided_schema(&p)),
            _ => false,
        };
        let (schema, stdin_prefix) = match plan.explicit.clone() {
            Some(s) => (Ok(s), None),
            None if !new_job && !undecided => (
                Err(Error::InvalidInput(format!(
                    "job `{job}` lost its checkpoints while this run opened it; run it again"
                ))),
                None,
            ),
            None => {
                let (inputs, format, strict) =
                    (plan.inputs.clone(), plan.input_format, plan.strict);
                let deadline = plan.schedule.inference_deadline(inference_began);
                let within = (deadline, plan.schedule.inference_records());
                let settle = plan.settle;
                let inferred = tokio::task::spawn_blocking(move || {
                    infer_from_inputs(&inputs, format, strict, within, settle)
                })
                .await
                .map_err(|e| Error::io("infer a schema from", "the inputs", e.into()))?;
                match inferred {
                    Ok((s, prefix)) => (Ok(json_types::exact_in_every_format(s)), prefix),
                    Err(e) => (Err(e), None),
                }
            }
        };
        match &schema {
            // A schema without columns comes from inputs without records: nothing to
            // partition.
            Ok(schema) if plan.explicit.is_some() || !schema.fields().is_empty() => {
                check_partition_columns(&plan.partition_by, plan.time.as_ref(), schema)?;
                if new_job || undecided {
                    check_output_columns(&plan.format, schema, &plan.partition_by)?;
                }
            }
            Ok(_) | Err(_) => {}
        }
        Ok(Fresh {
            schema,
            stdin_prefix,
            undecided,
        })
    }
}

/// The sink the job writes through: the format, the partitioner, each writer's share of the
/// memory budget, the rolling policy and the pre-commit merge.
fn build_sink(plan: &IngestPlan, storage: &Arc<dyn Storage>) -> Result<Sink> {
    let mut builder = Sink::builder_shared(storage.clone())
        .format(plan.format.clone())
        .buffer_bytes_max(plan.writer_bytes_max)
        .open_files_max(plan.writer_files_max)
        .rolling_policy(plan.rolling.clone());
    if let Some(p) = &plan.partitioner {
        builder = builder.bucket_assigner(p.clone());
    }
    if let Some(policy) = &plan.merge {
        builder = builder.merge_small_files(policy.clone());
    }
    builder.build()
}

/// The table options of a job that writes into a Delta table, and the schema the table is
/// opened with: the job's own when it resumes (read from its latest manifest before the job is
/// opened, and checked again after), else this run's columns, a column null in all of them
/// typed as the table has it (which `fresh` then takes).
async fn table_options(
    plan: &mut IngestPlan,
    latest: Option<&Manifest>,
    storage: &Arc<dyn Storage>,
    fresh: &mut Result<Schema>,
) -> Result<(Option<DeltaOptions>, Option<Schema>)> {
    let Some(options) = plan.table.clone() else {
        return Ok((None, None));
    };
    let schema = match latest.map(|m| job_schema(m, &plan.job)).transpose()? {
        Some(s) if !crate::table::delta::is_undecided(&s) => s,
        _ => {
            let taken = std::mem::replace(fresh, Ok(Schema::empty()));
            let s = crate::table::delta::fill_null_columns(storage.as_ref(), taken?).await?;
            *fresh = Ok(s.clone());
            s
        }
    };
    let location = plan.location();
    if let Some((c, _)) = &mut plan.compact {
        *c = c.clone().location(location.clone());
    }
    let options = options
        .schema(Arc::new(schema.clone()))
        .partition_by(plan.partition_by.clone())
        .time_directories(plan.time.iter().flat_map(|t| t.names().map(str::to_owned)))
        .single_writer_lease(plan.lease)
        .location(location);
    Ok((Some(options), Some(schema)))
}

/// What the lake already took of each input and of each part of a custom source, whichever
/// job took it (`ledger`): taken before anything is read, the job holding its own job
/// meanwhile. Per input: where the lake stands in it, and the job that took it there; per part
/// another job read: the next offset the lake stands at.
async fn take_inputs(
    plan: &mut IngestPlan,
    storage: &Arc<dyn Storage>,
    observer: &mut dyn Observer,
) -> Result<(Vec<Option<ledger::Taken>>, BTreeMap<String, u64>)> {
    let settle = plan.settle_options();
    let (mut parts, assigned) = source_parts(plan).await?;
    if assigned {
        // Taken as they are assigned, while the run goes on.
        plan.assigned_parts = Some(std::mem::take(&mut parts));
    }
    let mut claims: Vec<Option<ledger::Claim>> =
        plan.inputs.iter().map(ledger::Claim::of_input).collect();
    claims.extend(parts.iter().map(|p| Some(ledger::Claim::of_part(p))));
    let mut taken = ledger::take(storage, &plan.job, &claims, &settle).await?;
    let of_parts = taken.split_off(plan.inputs.len());
    let mut bases = BTreeMap::new();
    for (part, t) in parts.iter().zip(of_parts) {
        let Some(ledger::Taken { read, from }) = t else {
            continue;
        };
        if let Some(from) = from.filter(|f| f != &plan.job) {
            observer.note(&format!(
                "part `{part}` was taken by job `{from}` up to offset {}: reading on from there",
                read.offset
            ));
        }
        bases.insert(part.clone(), read.offset);
    }
    for (input, t) in plan.inputs.iter().zip(&taken) {
        if let Some(ledger::Taken {
            read,
            from: Some(from),
        }) = t
        {
            if from != &plan.job {
                observer.note(&format!(
                    "`{}` was taken by job `{from}` up to byte {}: reading on from there",
                    input.display, read.offset
                ));
            }
        }
    }
    Ok((taken, bases))
}

/// The parts of a custom source ([`Source::parts`](super::Source::parts)), and whether they
/// are assigned to it as it runs ([`Source::assigns_parts`](super::Source::assigns_parts)),
/// asked on a blocking thread: a source may block.
async fn source_parts(plan: &mut IngestPlan) -> Result<(Vec<String>, bool)> {
    let Some(mut source) = plan.custom.take().map(CustomSource::into_inner) else {
        return Ok((Vec::new(), false));
    };
    let (source, parts) = tokio::task::spawn_blocking(move || {
        let parts = source.parts();
        let assigned = source.assigns_parts();
        (source, parts.map(|p| (p, assigned)))
    })
    .await
    .map_err(|e| Error::io("list the parts of", "the source", e.into()))?;
    plan.custom = Some(CustomSource::new(source));
    parts
}

impl Resume {
    /// The job's restored position, checked against this run's options and inputs.
    async fn check(
        plan: &IngestPlan,
        coordinator: &mut Coordinator,
        taken: &[Option<ledger::Taken>],
        observer: &mut dyn Observer,
    ) -> Result<Resume> {
        let job = &plan.job;
        let inherited: Vec<Option<Prefix>> =
            taken.iter().map(|t| t.as_ref().map(|t| t.read)).collect();
        let canonical = plan.canonical();
        let mut restored = coordinator
            .source_position::<serde_json::Value>()?
            .map(|v| SourcePosition::from_json(job, &v))
            .transpose()?;
        let legacy =
            plan.custom_name.is_none() && restored.as_ref().is_some_and(|p| p.read.is_empty());
        // A finished job is read again for its files that grew, and for a stream (standard
        // input, a reader), which is read again to tell (by the caller).
        let finished_before = coordinator.is_finished();
        let mut files_grew = false;
        if let Some(p) = &mut restored {
            check_same_job(
                job,
                p,
                &canonical,
                plan.input_format,
                &plan.partition_by,
                plan.time_by.as_ref(),
            )?;
            if plan.custom_name.is_some() {
                // A custom source checks its position itself, when it seeks there.
                return Ok(Resume {
                    restored,
                    legacy,
                    finished_before,
                    files_grew,
                });
            }
            // A job that has taken no record is bound by nothing it read: the bytes before
            // its position held blank lines at most (or a CSV header), so it reads all its
            // inputs from their start, whatever they hold now: an input that is not what it
            // read is not refused, standard input is not compared, and a CSV header is read
            // (and checked against the columns this run takes) wherever it now is, also in a
            // file that held blank lines only and grew. Inputs are checked first, against
            // what was read, so that only a file that grew or changed is said to have (and
            // reopens a finished job).
            let took_none = p.records == 0 && p.bad_records == 0;
            // Inputs another job read on since this one's checkpoint start where it stopped.
            take_over(p, &inherited);
            if !p.read.is_empty() {
                files_grew =
                    reread_grown(plan, coordinator, p, &inherited, took_none, observer).await?;
            } else if !finished_before {
                p.read = legacy_read(job, p, &plan.inputs, observer);
                take_over(p, &inherited);
            }
            if took_none && !p.read.is_empty() {
                read_from_start(p);
                take_over(p, &inherited);
            }
        } else if inherited.iter().any(Option::is_some) {
            // A new job that names inputs the lake took checks them as a resumed job does:
            // one replaced under the lake is refused before anything is written.
            let owners: Vec<String> = taken
                .iter()
                .map(|t| t.as_ref().and_then(|t| t.from.clone()).unwrap_or_default())
                .collect();
            check_taken(plan.inputs.clone(), inherited, owners).await?;
        }
        Ok(Resume {
            restored,
            legacy,
            finished_before,
            files_grew,
        })
    }
}

/// Checks each input of a restored job against what was read of it, input by input, so
/// that a job that took no record knows which one changed and checks the others too. A
/// finished job whose inputs grew (or, having taken no record, changed) is reopened; returns
/// whether it was.
async fn reread_grown(
    plan: &IngestPlan,
    coordinator: &mut Coordinator,
    p: &SourcePosition,
    inherited: &[Option<Prefix>],
    took_none: bool,
    observer: &mut dyn Observer,
) -> Result<bool> {
    let job = &plan.job;
    let finished_before = coordinator.is_finished();
    let checked = {
        let (job, inputs, read) = (job.clone(), plan.inputs.clone(), p.read.clone());
        let bound: Vec<bool> = inherited.iter().map(Option::is_some).collect();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::with_capacity(inputs.len());
            for (i, r) in inputs.iter().zip(&read) {
                let c = check_read(&job, std::slice::from_ref(i), std::slice::from_ref(r));
                let last = match &c {
                    Ok(_) => false,
                    Err(Error::InputChanged(_)) => !took_none || bound[out.len()],
                    Err(_) => true,
                };
                out.push(c);
                if last {
                    break;
                }
            }
            out
        })
        .await
        .map_err(|e| Error::io("check", "the inputs", e.into()))?
    };
    let mut grew = Vec::with_capacity(checked.len());
    let mut changed = false;
    for (i, checked) in checked.into_iter().enumerate() {
        match checked {
            Ok(g) => grew.extend(g),
            Err(Error::InputChanged(_)) if took_none && inherited[i].is_none() => {
                observer.note(&format!(
                    "job `{job}` has taken no record yet, and `{}` is not what it read: \
                     reading its inputs from their start",
                    plan.inputs[i].display
                ));
                changed = true;
                grew.push(false);
            }
            Err(e) => return Err(e),
        }
    }
    let mut reopened = false;
    if changed && finished_before {
        coordinator.reopen();
        reopened = true;
    }
    if finished_before && grew.iter().any(|g| *g) {
        let names: Vec<&str> = plan
            .inputs
            .iter()
            .zip(&grew)
            .filter(|(_, g)| **g)
            .map(|(i, _)| i.display.as_str())
            .collect();
        // A job that took no record reads its inputs whole again.
        let what = match took_none {
            true => "reading its inputs from their start, as it took no record yet",
            false => "ingesting what was added",
        };
        observer.note(&format!(
            "job `{job}` finished at checkpoint {}, and since then `{}` grew: {what}",
            coordinator.last_checkpoint(),
            names.join("`, `")
        ));
        coordinator.reopen();
        reopened = true;
    }
    Ok(reopened)
}

/// Checks the inputs a new job names that the lake took (`read`, by job `owners`).
async fn check_taken(
    inputs: Vec<Input>,
    read: Vec<Option<Prefix>>,
    owners: Vec<String>,
) -> Result<()> {
    tokio::task::spawn_blocking(move || {
        for ((input, r), owner) in inputs.iter().zip(&read).zip(&owners) {
            if let Some(r) = r {
                check_read(owner, std::slice::from_ref(input), std::slice::from_ref(r))?;
            }
        }
        Ok::<_, Error>(())
    })
    .await
    .map_err(|e| Error::io("check", "the inputs", e.into()))?
}

/// The summary of a job that had finished and has nothing new. A table job with background
/// compaction runs one round even so: the run that finished the job may have died in its last
/// round, which this one finishes.
async fn already_finished(
    plan: &mut IngestPlan,
    storage: &Arc<dyn Storage>,
    table_exists: bool,
    last_checkpoint: u64,
    restored: Option<&SourcePosition>,
) -> IngestSummary {
    let compaction = match plan.compact.take() {
        Some((options, _)) if table_exists => {
            Some(compaction::Background::once(storage.clone(), &options).await)
        }
        _ => None,
    };
    IngestSummary {
        job: plan.job.clone(),
        status: IngestStatus::AlreadyFinished,
        resumed: true,
        records: 0,
        records_total: restored.map_or(0, |p| p.records),
        bad_records: 0,
        files: 0,
        bytes: 0,
        checkpoints: 0,
        input_bytes: 0,
        last_checkpoint,
        stage_times: StageTimes::default(),
        compaction,
        skipped: Vec::new(),
        waiting: Vec::new(),
        unchanged: plan.unchanged,
        refused: plan.refused.clone(),
    }
}

/// Tells the observer where a resumed job resumes, and what its restore committed: only files
/// that became visible now (a rerun re-commits the latest checkpoint's files, which are mostly
/// there already: `AlreadyCommitted`).
fn note_resumed(
    plan: &IngestPlan,
    coordinator: &Coordinator,
    restored: Option<&SourcePosition>,
    observer: &mut dyn Observer,
) {
    let restored_commits = coordinator
        .restored_outcomes()
        .iter()
        .filter(|o| **o == crate::protocol::CommitOutcome::Committed)
        .count();
    if let Some(p) = restored {
        let at = match &plan.custom_name {
            Some(name) => format!("`{name}` record {}", p.cursor.line),
            None => p
                .inputs
                .get(p.cursor.input)
                .and_then(|c| plan.inputs.iter().find(|i| &i.canonical == c))
                .map_or("the end of the input".to_string(), |i| {
                    format!("{}:{}", i.display, p.cursor.line)
                }),
        };
        observer.note(&format!(
            "resuming job `{}` from checkpoint {} at {at} ({} records written)",
            plan.job,
            coordinator.last_checkpoint(),
            p.records
        ));
    }
    if restored_commits > 0 {
        observer.note(&format!(
            "committed {restored_commits} pending file(s) of checkpoint {}",
            coordinator.last_checkpoint()
        ));
    }
}

/// The records' schema: the job's own when resuming, else the given one, else inferred.
fn decide_schema(
    plan: &IngestPlan,
    restored: Option<&SourcePosition>,
    fresh: Result<Schema>,
    undecided: bool,
    observer: &mut dyn Observer,
) -> Result<Schema> {
    let job = &plan.job;
    Ok(match (restored, &plan.explicit) {
        // The job wrote nothing its schema could hold: the one given or inferred now.
        (Some(p), _) if undecided_schema(p) => {
            if !undecided {
                return Err(Error::InvalidInput(format!(
                    "job `{job}` changed while this run opened it; run it again"
                )));
            }
            let s = fresh?;
            if !s.fields().is_empty() {
                observer.note(&format!(
                    "job `{job}` has written no record yet: it takes the columns of this run's \
                     records ({})",
                    describe_schema(&s)
                ));
            }
            s
        }
        (Some(p), Some(s)) if s.fields() != p.schema.fields() => {
            return Err(Error::InvalidInput(format!(
                "job `{job}` was started with another schema ({}); use another --job for this \
                 one",
                describe_schema(&p.schema)
            )));
        }
        (Some(p), _) => p.schema.clone(),
        (None, Some(_)) => fresh?,
        (None, None) => {
            let s = fresh?;
            if !s
                .fields()
                .iter()
                .all(|f| f.data_type() == &arrow::datatypes::DataType::Null)
            {
                observer.note(&format!(
                    "columns inferred from the first records of the inputs (up to {}): {}; \
                     later values that do not fit them are bad records (pass --schema to \
                     choose)",
                    source::INFER_RECORDS,
                    describe_schema(&s)
                ));
            }
            s
        }
    })
}

/// The bad-records file, opened for the job (see `BadRecords::open`).
async fn open_bad_records(
    plan: &IngestPlan,
    sink: &Sink,
    restored: Option<&SourcePosition>,
    legacy: bool,
    observer: &mut dyn Observer,
) -> Result<BadRecords> {
    let sink_id = manifest::sink_identity(sink.storage().as_ref(), false)
        .await?
        .map(|s| s.sink_id)
        .unwrap_or_default();
    let inputs = plan
        .inputs
        .iter()
        .map(|i| bad_records::InputName {
            display: i.display.clone(),
            canonical: i.canonical.clone(),
        })
        .collect();
    let (bad_file, note) = BadRecords::open(
        plan.bad_records_path.as_deref(),
        restored,
        legacy,
        &plan.job,
        &sink_id,
        inputs,
    )
    .await?;
    if let Some(note) = note {
        observer.note(&note);
    }
    Ok(bad_file)
}

/// Where the run starts: the restored position (in the current layout), or a new job's start,
/// moved on to where the lake stands in inputs other jobs took.
fn start_position(
    plan: &IngestPlan,
    restored: Option<&SourcePosition>,
    taken: &[Option<ledger::Taken>],
    schema: &Schema,
) -> SourcePosition {
    let custom = plan.custom_name.is_some();
    let version = match custom {
        true => SourcePosition::VERSION_SOURCE,
        false => SourcePosition::version_for(plan.time_by.as_ref()),
    };
    let mut position = restored.cloned().unwrap_or_else(|| SourcePosition {
        version,
        inputs: plan.canonical(),
        input_format: plan.input_format,
        partition_by: plan.partition_by.clone(),
        partition_by_time: plan.time_by.clone(),
        cursor: Cursor::START,
        read: vec![Prefix::START; plan.inputs.len()],
        source: None,
        records: 0,
        bad_records: 0,
        bad_records_len: None,
        bad_records_file: None,
        bad_records_tail: None,
        schema: schema.clone(),
    });
    position.schema = schema.clone();
    if restored.is_none() {
        let inherited: Vec<Option<Prefix>> =
            taken.iter().map(|t| t.as_ref().map(|t| t.read)).collect();
        take_over(&mut position, &inherited);
    }
    // Restored from an older layout (version 1, no read prefixes), the position this run
    // writes has the current one: it says so.
    position.version = position.version.max(version);
    position
}

/// Seeks a custom source to where the job's restored checkpoint stands (its start for a new
/// job), each of its parts moved on to where the lake stands in it (`bases`), on a blocking
/// thread: a source may block.
async fn seek_custom(
    plan: &mut IngestPlan,
    restored: Option<&SourcePosition>,
    bases: &BTreeMap<String, u64>,
) -> Result<()> {
    let Some(mut source) = plan.custom.take().map(CustomSource::into_inner) else {
        return Ok(());
    };
    let mut position = restored.and_then(|p| p.source.clone());
    if !bases.is_empty() {
        let mut parts = match &position {
            Some(p) => PartOffsets::from_json(p).ok_or_else(|| {
                Error::corrupt(
                    format!("source position of job `{}`", plan.job),
                    "its source has parts, and it holds no offsets of parts",
                )
            })?,
            None => PartOffsets::default(),
        };
        parts.at_least(bases);
        position = Some(parts.to_json());
    }
    let source =
        tokio::task::spawn_blocking(move || source.seek(position.as_ref()).map(|()| source))
            .await
            .map_err(|e| Error::io("seek", "the source", e.into()))??;
    plan.custom = Some(CustomSource::new(source));
    Ok(())
}

/// Whether a job's schema is not decided yet: it has written no record, and its schema can
/// hold none (no columns, inferred from inputs without records; or only columns of type
/// `Null`, inferred by an earlier build from a CSV header alone). Its next run that sees
/// records takes their schema; until then nothing was written that the change could break.
fn undecided_schema(p: &SourcePosition) -> bool {
    p.records == 0
        && p.schema
            .fields()
            .iter()
            .all(|f| f.data_type() == &arrow::datatypes::DataType::Null)
}

/// Sets `p` to read every input from its start (`took_none` in [`Resume::check`]).
fn read_from_start(p: &mut SourcePosition) {
    p.read = vec![Prefix::START; p.read.len()];
    p.cursor = Cursor::START;
}

/// Moves `p` on to where the lake stands in each input another job read further
/// (`ledger::take`); a position without read prefixes (an older layout) is left alone.
fn take_over(p: &mut SourcePosition, inherited: &[Option<Prefix>]) {
    if p.read.len() != inherited.len() {
        return;
    }
    for (read, taken) in p.read.iter_mut().zip(inherited) {
        if let Some(t) = taken {
            if t.offset > read.offset {
                *read = *t;
            }
        }
    }
}

/// The source position of `job`'s latest manifest, if it has one.
async fn peek_position(storage: &dyn Storage, job: &str) -> Result<Option<SourcePosition>> {
    match manifest::latest_manifest(storage, job, None).await? {
        Some(m) if crate::maintain::compaction_round(&m).is_none() => {
            SourcePosition::from_json(job, &m.source_position).map(Some)
        }
        _ => Ok(None),
    }
}

/// The record schema of job `job` as its manifest `m` says; a compaction job's is refused.
fn job_schema(m: &Manifest, job: &str) -> Result<Schema> {
    if crate::maintain::compaction_round(m).is_some() {
        return Err(Error::conflict(
            crate::protocol::job_dir(job),
            format!(
                "job `{job}` is a compaction job (`filesink compact`, an ingest's \
                 `<job>_compact`), not an ingest: choose another job name"
            ),
        ));
    }
    Ok(SourcePosition::from_json(job, &m.source_position)?.schema)
}
