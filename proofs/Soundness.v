(** * Soundness of the fragment: a symbolically typed expression is typed at every admissible
    instance (dims satisfying the [where] assumptions; by the lemmas of Instances.v), and the
    instance's semantics enjoys progress and preservation. Together: subject reduction and progress
    for symbolically typed programs, with symbolic dims under assumptions. *)
From Coq Require Import List Arith String Bool Lia.
From Kina Require Import Dims Types Rules Lang Instances.
Import ListNotations.

(** ** Instantiation: a symbolically typed expression is typed at every admissible
    instance by the concrete rules. *)
Definition inst_ctx (i : inst) (G : ctx ty) : ctx cty :=
  map (fun p => (fst p, inst_ty i (snd p))) G.

Lemma lookup_inst : forall i G x,
  lookup (inst_ctx i G) x = option_map (inst_ty i) (lookup G x).
Proof.
  induction G as [|[y t] G IH]; intro x; simpl; auto.
  destruct (String.eqb x y); auto.
Qed.

Theorem instantiate : forall A G e t i,
  has_type A G e t -> inst_ok A i -> wf_ctx G ->
  wf_ty t /\ rt_type i (inst_ctx i G) e (inst_ty i t).
Proof.
  intros A G e t i H Ok; induction H; intro WG.
  - split; [apply (WG x t H)|]; apply R_Var; rewrite lookup_inst, H; auto.
  - split; [intro; auto|]; apply R_LitF.
  - split; [intro; auto|]; apply R_LitI.
  - destruct (IHhas_type WG) as [W R]; clear IHhas_type.
    unfold s_unary in H0; destruct t as [dt sh dv]; simpl in *.
    destruct dt as [b|v| |].
    + destruct (is_float_base b) eqn:E; [|discriminate]; injection H0 as <-.
      split; auto; eapply R_Un; [exact R|]; unfold c_unary, inst_ty; simpl; rewrite E; auto.
    + injection H0 as <-; split; auto; eapply R_Un; [exact R|]; unfold c_unary, inst_ty; simpl.
      destruct Ok as [_ [_ Fl]]; rewrite Fl; auto.
    + injection H0 as <-; split; [intro; auto|].
      destruct (W eq_refl) as [Hs Hd]; simpl in Hs, Hd; subst.
      eapply R_Un; [exact R|]; reflexivity.
    + injection H0 as <-; split; [intro; auto|]; eapply R_Un; [exact R|]; reflexivity.
  - destruct (IHhas_type WG) as [W R]; clear IHhas_type.
    split.
    + intro Hw; unfold s_cast in Hw; simpl in Hw; rewrite H in Hw; discriminate.
    + destruct t as [dt sh dv]; unfold s_cast; simpl in *.
      replace (inst_ty i (Ty d (if is_weak dt then scalar else sh) dv))
        with (c_cast (inst_dtype i d) (inst_ty i (Ty dt sh dv))).
      * apply R_Cast; auto.
      * unfold c_cast, inst_ty; simpl.
        destruct (is_weak dt) eqn:E; auto.
        destruct (W E) as [Hs _]; simpl in Hs; subst; auto.
  - destruct (IHhas_type1 WG) as [Wa Ra]; destruct (IHhas_type2 WG) as [Wb Rb].
    clear IHhas_type1 IHhas_type2.
    assert (Weak : is_weak d' = true ->
              d' = d /\ ty_shape ta = scalar /\ ty_shape tb = scalar /\ s = scalar
              /\ dev = DevAny).
    { intro Wd; pose proof (bin_dtype_weak _ _ _ _ H2 Wd) as E; subst d'.
      destruct (join_dtype_weak _ _ _ H1 Wd) as [W1 W2].
      destruct (Wa W1) as [S1 D1]; destruct (Wb W2) as [S2 D2].
      rewrite S1, S2 in H4; rewrite D1, D2 in H3; simpl in H3; injection H3 as <-.
      repeat split; auto; eapply scalar_bcast; eauto. }
    split.
    + intro Wr; unfold weak_result in Wr; simpl in Wr.
      destruct (is_weak d') eqn:Wd.
      * destruct (Weak eq_refl) as [_ [_ [_ [Hs Hd]]]]; subst; auto.
      * simpl in Wr; rewrite Wd in Wr; discriminate.
    + eapply R_Bin; [exact Ra | exact Rb |].
      unfold c_binary; simpl.
      rewrite (join_dtype_inst A i _ _ d Ok H1), (bin_dtype_inst A i k op d d' Ok H2), H3.
      rewrite (broadcast_sound A i _ _ s H4 Ok).
      unfold inst_ty; simpl; f_equal; f_equal.
      unfold weak_result; rewrite inst_weak.
      destruct (is_weak d') eqn:Wd; simpl; auto.
      destruct (Weak eq_refl) as [_ [_ [_ [Hs _]]]]; subst; reflexivity.
  - destruct (IHhas_type WG) as [W R]; clear IHhas_type.
    destruct (reduce_inst A i op keep ax t t' Ok H0) as [C Nw].
    split; [intro Hw; rewrite Nw in Hw; discriminate|].
    eapply R_Red; [exact R | exact C].
  - destruct (IHhas_type1 WG) as [Wa Ra]; destruct (IHhas_type2 WG) as [Wb Rb].
    destruct (mm_dtype_inst A i _ _ d Ok H1) as [Dt Nw].
    split; [intro Hw; simpl in Hw; rewrite Nw in Hw; discriminate|].
    eapply R_Mat; [exact Ra | exact Rb |].
    unfold c_matmul; simpl; rewrite Dt, H2, (mm_shape_sound A i _ _ s H3 Ok); reflexivity.
  - destruct (IHhas_type1 WG) as [W1 R1].
    assert (WG' : wf_ctx ((x, t1) :: G)).
    { intros y u Hy; simpl in Hy; destruct (String.eqb y x); [injection Hy as <-; auto|].
      apply (WG y u Hy). }
    destruct (IHhas_type2 WG') as [W2 R2]; split; auto.
    eapply R_Let; [exact R1 | exact R2].
Qed.

(** ** Progress and preservation of one instance. *)
Lemma context_invariance : forall i G e t,
  rt_type i G e t -> forall G', (forall x, lookup G x = lookup G' x) -> rt_type i G' e t.
Proof.
  intros i G e t H; induction H; intros G' Eq; try (econstructor; eauto; fail).
  - apply R_Var; rewrite <- Eq; auto.
  - eapply R_Let; [apply IHrt_type1; auto | apply IHrt_type2].
    intro y; simpl; destruct (String.eqb y x); auto.
Qed.

Lemma substitution : forall i e G x v t,
  rt_type i ((x, v) :: G) e t -> rt_type i G (subst x v e) t.
Proof.
  intros i e;
    induction e as [z| | |c|op a IH|k op a IHa b IHb|d a IH|op kp ax a IH|a IHa b IHb
                   |z e1 IHe1 e2 IHe2];
    intros G y u t H; inversion H; subst; simpl; try (econstructor; eauto; fail).
  - simpl in H2; destruct (String.eqb_spec y z); subst.
    + rewrite String.eqb_refl in H2; injection H2 as <-; apply R_Val.
    + destruct (String.eqb_spec z y); [congruence|]; apply R_Var; auto.
  - destruct (String.eqb_spec y z); subst.
    + eapply R_Let; [apply IHe1; eauto|].
      eapply context_invariance; [exact H6|].
      intro w; simpl; destruct (String.eqb w z); auto.
    + eapply R_Let; [apply IHe1; eauto|]. apply IHe2.
      eapply context_invariance; [exact H6|].
      intro w; simpl; destruct (String.eqb_spec w z), (String.eqb_spec w y); subst; auto.
      congruence.
Qed.

Theorem preservation : forall i e e' t,
  rt_type i [] e t -> step i e e' -> rt_type i [] e' t.
Proof.
  intros i e e' t H S; revert t H.
  induction S; intros t Ht; inversion Ht; subst;
    try (econstructor; eauto; fail).
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end.
    match goal with H1 : c_unary ?a = _, H2 : c_unary ?a = _ |- _ =>
      rewrite H1 in H2; injection H2 as <- end; apply R_Val.
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end; apply R_Val.
  - repeat match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst; clear H end.
    match goal with H1 : c_binary _ _ _ _ = _, H2 : c_binary _ _ _ _ = _ |- _ =>
      rewrite H1 in H2; injection H2 as <- end; apply R_Val.
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end.
    assert (v' = t) by congruence; subst; apply R_Val.
  - repeat match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst; clear H end.
    assert (v = t) by congruence; subst; apply R_Val.
  - match goal with H : rt_type _ _ (EVal _) _ |- _ => inversion H; subst end.
    apply substitution; auto.
Qed.

Theorem progress : forall i e t,
  rt_type i [] e t -> is_value e \/ exists e', step i e e'.
Proof.
  intros i e t H; remember (@nil (string * cty)) as G.
  induction H; subst.
  - discriminate.
  - right; eexists; apply S_LitF.
  - right; eexists; apply S_LitI.
  - left; eexists; eauto.
  - right; destruct IHrt_type as [[v ->]|[e' S]]; auto.
    + inversion H; subst; eexists; apply S_Un; eauto.
    + eexists; apply S_UnC; eauto.
  - right; destruct IHrt_type as [[v ->]|[e' S]]; auto.
    + eexists; apply S_Cast.
    + eexists; apply S_CastC; eauto.
  - right; destruct IHrt_type1 as [[va ->]|[a' S]]; auto.
    + destruct IHrt_type2 as [[vb ->]|[b' S]]; auto.
      * inversion H; inversion H0; subst; eexists; apply S_Bin; eauto.
      * eexists; apply S_BinR; eauto.
    + eexists; apply S_BinL; eauto.
  - right; destruct IHrt_type as [[v ->]|[e' S]]; auto.
    + inversion H; subst; eexists; apply S_Red; eauto.
    + eexists; apply S_RedC; eauto.
  - right; destruct IHrt_type1 as [[va ->]|[a' S]]; auto.
    + destruct IHrt_type2 as [[vb ->]|[b' S]]; auto.
      * inversion H; inversion H0; subst; eexists; apply S_Mat; eauto.
      * eexists; apply S_MatR; eauto.
    + eexists; apply S_MatL; eauto.
  - right; destruct IHrt_type1 as [[v ->]|[e' S]]; auto.
    + eexists; apply S_Let.
    + eexists; apply S_LetC; eauto.
Qed.

(** ** The fragment's soundness, with symbolic dims under assumptions. *)

(** Subject reduction: a program typed symbolically under [A] keeps, after any number of
    steps of any admissible instance, the instance of its type. *)
Theorem subject_reduction : forall A e t i e',
  has_type A [] e t -> inst_ok A i -> multi i e e' -> rt_type i [] e' (inst_ty i t).
Proof.
  intros A e t i e' H Ok M.
  destruct (instantiate A [] e t i H Ok) as [_ R]; [intros x u Hx; discriminate|].
  simpl in R; clear H; induction M; auto.
  apply IHM; eapply preservation; eauto.
Qed.

(** Progress: such a program is never stuck: it is a value or it steps. *)
Theorem type_safety : forall A e t i e',
  has_type A [] e t -> inst_ok A i -> multi i e e' ->
  (exists v, e' = EVal v /\ v = inst_ty i t) \/ exists e'', step i e' e''.
Proof.
  intros A e t i e' H Ok M.
  pose proof (subject_reduction A e t i e' H Ok M) as R.
  destruct (progress i e' _ R) as [[v ->]|S]; auto.
  left; exists v; split; auto; inversion R; auto.
Qed.
