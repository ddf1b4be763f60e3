(** * Rules: the elementwise typing rules of spec section 5, as kinac runs them.

    Each rule has a concrete form (integers; what a specialised program and the run-time
    semantics use: kinac's [c_broadcast], [c_dtype], the primitives' [concrete] evaluators)
    and a symbolic form (dims with variables, judged under the defn's assumptions: kinac's
    [broadcast]/[bcast_pair], [join_dtype], [join_device]). The symbolic broadcast is a
    relation (its equalities are obligations); [s_broadcast] is an executable instance of it
    (syntactic equality, kinac's first test) used by the rule-agreement test. *)
From Coq Require Import List Arith String Bool Lia.
From Kina Require Import Dims Types.
Import ListNotations.

(** ** Concrete broadcasting (kinac [c_broadcast]): shapes align from the right. *)
Definition bcast_dim (a b : nat) : option nat :=
  if Nat.eqb a 1 then Some b
  else if Nat.eqb b 1 then Some a
  else if Nat.eqb a b then Some a
  else None.

Fixpoint bcast_rev (a b : list nat) : option (list nat) :=
  match a, b with
  | [], _ => Some b
  | _, [] => Some a
  | x :: a', y :: b' =>
      match bcast_dim x y, bcast_rev a' b' with
      | Some z, Some r => Some (z :: r)
      | _, _ => None
      end
  end.

Definition c_broadcast (a b : list nat) : option (list nat) :=
  match bcast_rev (rev a) (rev b) with Some r => Some (rev r) | None => None end.

(** ** Dtypes (kinac [join_dtype] / [c_dtype] for two operands). Strong dtypes must be
    equal; a weak literal takes the strong one's dtype, but a float literal may not meet an
    integer or bool tensor; two weak literals stay weak (float if either is). *)
Definition lit_meets (strong lit : dtype) : option dtype :=
  match strong, lit with
  | DT x, WeakF => if is_float_base x then Some strong else None
  | _, _ => Some strong
  end.

Definition join_dtype (a b : dtype) : option dtype :=
  match is_weak a, is_weak b with
  | true, true =>
      match a, b with WeakI, WeakI => Some WeakI | _, _ => Some WeakF end
  | false, true => lit_meets a b
  | true, false => lit_meets b a
  | false, false => if dtype_eqb a b then Some a else None
  end.

(** kinac's [is_float] on the symbolic side: dtype variables and weak literals count. *)
Definition float_like (d : dtype) : bool :=
  match d with DT b => is_float_base b | _ => true end.

Inductive bkind : Type := Arith | Compare.

(** The per-operator dtype checks of kinac's binary rule: only [eq] takes bool, [pow] needs
    a float; comparisons give bool. *)
Definition bin_dtype (k : bkind) (op : string) (d : dtype) : option dtype :=
  if dtype_eqb d (DT Bool) && negb (String.eqb op "eq") then None
  else if String.eqb op "pow" && negb (float_like d) then None
  else match k with Compare => Some (DT Bool) | Arith => Some d end.

(** A weak result over a non-scalar shape becomes f32 (kinac's binary rule). *)
Definition weak_result (d : dtype) (is_scalar : bool) : dtype :=
  if is_weak d && negb is_scalar then DT F32 else d.

Definition join_dev (a b : device) : option device :=
  match a, b with
  | DevAny, _ => Some b
  | _, DevAny => Some a
  | _, _ => if device_eqb a b then Some a else None
  end.

(** ** Concrete rules of the unary, cast and binary primitives. *)
Definition c_unary (t : cty) : option cty :=
  match c_dtype t with
  | DT b => if is_float_base b then Some t else None
  | WeakI => Some (CTy WeakF [] DevAny)
  | WeakF => Some t
  | DTVar _ => None
  end.

Definition c_cast (d : dtype) (t : cty) : cty := CTy d (c_shape t) (c_device t).

Definition c_binary (k : bkind) (op : string) (a b : cty) : option cty :=
  match join_dtype (c_dtype a) (c_dtype b) with
  | None => None
  | Some d =>
      match bin_dtype k op d, join_dev (c_device a) (c_device b),
            c_broadcast (c_shape a) (c_shape b) with
      | Some d', Some dev, Some s =>
          Some (CTy (weak_result d' (match s with [] => true | _ => false end)) s dev)
      | _, _, _ => None
      end
  end.

(** ** Symbolic broadcasting, as a relation under assumptions [A]. A pair of dims broadcasts
    when one is the literal 1, when they are provably equal, or when one is provably 1. *)
Inductive dim_bcast (A : list constr) : dim -> dim -> dim -> Prop :=
| DB_one_l : forall d, dim_bcast A (DLit 1) d d
| DB_one_r : forall d, dim_bcast A d (DLit 1) d
| DB_eq : forall a b, provably_eq A a b -> dim_bcast A a b a
| DB_prov_one_l : forall a b, provably_eq A a (DLit 1) -> dim_bcast A a b b
| DB_prov_one_r : forall a b, provably_eq A b (DLit 1) -> dim_bcast A a b a.

(** On reversed fixed dims: pairs from the right, the longer one's extra dims kept. *)
Inductive rev_bcast (A : list constr) : list dim -> list dim -> list dim -> Prop :=
| RB_nil_l : forall b, rev_bcast A [] b b
| RB_nil_r : forall a, rev_bcast A a [] a
| RB_cons : forall x y z a b c,
    dim_bcast A x y z -> rev_bcast A a b c -> rev_bcast A (x :: a) (y :: b) (z :: c).

Definition group_join (g1 g2 : option string) : option (option string) :=
  match g1, g2 with
  | None, g | g, None => Some g
  | Some x, Some y => if String.eqb x y then Some (Some x) else None
  end.

(** kinac [bcast_pair]: variadic groups broadcast only with themselves or with nothing;
    a group may not align with fixed dims of the other operand. *)
Inductive shape_bcast (A : list constr) : shape -> shape -> shape -> Prop :=
| SB_same : forall (g1 g2 g : option string) (a b c : list dim),
    List.length a = List.length b -> group_join g1 g2 = Some g ->
    rev_bcast A (rev a) (rev b) (rev c) ->
    shape_bcast A (Shape g1 a) (Shape g2 b) (Shape g c)
| SB_left : forall (g : option string) (a b c : list dim),
    List.length b < List.length a -> rev_bcast A (rev a) (rev b) (rev c) ->
    shape_bcast A (Shape g a) (Shape None b) (Shape g c)
| SB_right : forall (g : option string) (a b c : list dim),
    List.length a < List.length b -> rev_bcast A (rev a) (rev b) (rev c) ->
    shape_bcast A (Shape None a) (Shape g b) (Shape g c).

(** ** Executable symbolic rules (syntactic dim equality). *)
Definition s_bcast_dim (a b : dim) : option dim :=
  if dim_eqb a (DLit 1) then Some b
  else if dim_eqb b (DLit 1) then Some a
  else if dim_eqb a b then Some a
  else None.

Fixpoint s_bcast_rev (a b : list dim) : option (list dim) :=
  match a, b with
  | [], _ => Some b
  | _, [] => Some a
  | x :: a', y :: b' =>
      match s_bcast_dim x y, s_bcast_rev a' b' with
      | Some z, Some r => Some (z :: r)
      | _, _ => None
      end
  end.

Definition s_broadcast (a b : shape) : option shape :=
  match s_bcast_rev (rev (fixed a)) (rev (fixed b)) with
  | None => None
  | Some r =>
      if Nat.eqb (List.length (fixed a)) (List.length (fixed b)) then
        match group_join (group a) (group b) with
        | Some g => Some (Shape g (rev r))
        | None => None
        end
      else if Nat.ltb (List.length (fixed b)) (List.length (fixed a)) then
        match group b with None => Some (Shape (group a) (rev r)) | Some _ => None end
      else
        match group a with None => Some (Shape (group b) (rev r)) | Some _ => None end
  end.

Definition is_scalar_shape (s : shape) : bool :=
  match s with Shape None [] => true | _ => false end.

Definition s_unary (t : ty) : option ty :=
  match ty_dtype t with
  | DT b => if is_float_base b then Some t else None
  | DTVar _ => Some t
  | WeakI | WeakF => Some (Ty WeakF scalar DevAny)
  end.

Definition s_cast (d : dtype) (t : ty) : ty :=
  Ty d (if is_weak (ty_dtype t) then scalar else ty_shape t) (ty_device t).

Definition s_binary (k : bkind) (op : string) (a b : ty) : option ty :=
  match join_dtype (ty_dtype a) (ty_dtype b) with
  | None => None
  | Some d =>
      match bin_dtype k op d, join_dev (ty_device a) (ty_device b),
            s_broadcast (ty_shape a) (ty_shape b) with
      | Some d', Some dev, Some s => Some (Ty (weak_result d' (is_scalar_shape s)) s dev)
      | _, _, _ => None
      end
  end.

(** ** The executable symbolic broadcast is an instance of the relation. *)
Lemma s_bcast_dim_sound : forall A a b c, s_bcast_dim a b = Some c -> dim_bcast A a b c.
Proof.
  unfold s_bcast_dim; intros A a b c H.
  destruct (dim_eqb a (DLit 1)) eqn:E1.
  { apply dim_eqb_eq in E1; subst; injection H as <-; constructor. }
  destruct (dim_eqb b (DLit 1)) eqn:E2.
  { apply dim_eqb_eq in E2; subst; injection H as <-; constructor. }
  destruct (dim_eqb a b) eqn:E3; [|discriminate].
  apply dim_eqb_eq in E3; subst; injection H as <-; apply DB_eq, provably_eq_refl.
Qed.

Lemma s_bcast_rev_sound :
  forall A a b c, s_bcast_rev a b = Some c -> rev_bcast A a b c.
Proof.
  induction a as [|x a IH]; intros b c H; simpl in H.
  - injection H as <-; constructor.
  - destruct b as [|y b].
    + injection H as <-; constructor.
    + destruct (s_bcast_dim x y) eqn:E1; [|discriminate].
      destruct (s_bcast_rev a b) eqn:E2; [|discriminate].
      injection H as <-; constructor; [apply s_bcast_dim_sound; auto | apply IH; auto].
Qed.

Lemma s_broadcast_sound :
  forall A a b c, s_broadcast a b = Some c -> shape_bcast A a b c.
Proof.
  unfold s_broadcast; intros A [ga a] [gb b] c H; simpl in H.
  destruct (s_bcast_rev (rev a) (rev b)) as [r|] eqn:E; [|discriminate].
  apply (s_bcast_rev_sound A) in E.
  rewrite <- (rev_involutive r) in E.
  destruct (Nat.eqb_spec (List.length a) (List.length b)).
  - destruct (group_join ga gb) eqn:G; [|discriminate].
    injection H as <-; apply SB_same; auto.
  - destruct (Nat.ltb_spec (List.length b) (List.length a)).
    + destruct gb; [discriminate|]; injection H as <-; apply SB_left; auto.
    + destruct ga; [discriminate|]; injection H as <-; apply SB_right; auto; lia.
Qed.

(** ** Reductions ([sum mean max min] with [:axis] and [:keepdims], kinac's reduce rules).
    An axis is [AFront k] ([k >= 0]) or [ABack k] (the negative axis [-k], [k >= 1]); after a
    variadic group only negative axes are static. *)
Inductive axis : Type := AFront (k : nat) | ABack (k : nat).

Definition remove_at {A : Type} (k : nat) (l : list A) : list A := firstn k l ++ skipn (S k) l.
Definition set_at {A : Type} (k : nat) (v : A) (l : list A) : list A :=
  firstn k l ++ v :: skipn (S k) l.

Definition c_axis (n : nat) (ax : axis) : option nat :=
  match ax with
  | AFront k => if Nat.ltb k n then Some k else None
  | ABack k => if Nat.leb 1 k && Nat.leb k n then Some (n - k) else None
  end.

Definition s_axis (s : shape) (ax : axis) : option nat :=
  match group s, ax with
  | Some _, AFront _ => None
  | _, _ => c_axis (List.length (fixed s)) ax
  end.

(** The dtype side: not on weak scalars or bool; [mean] needs a float. *)
Definition reduce_dtype_ok (op : string) (d : dtype) : bool :=
  negb (is_weak d) && negb (dtype_eqb d (DT Bool))
  && (negb (String.eqb op "mean") || float_like d).

Definition c_reduce (op : string) (keep : bool) (ax : axis) (t : cty) : option cty :=
  if reduce_dtype_ok op (c_dtype t) then
    match c_axis (List.length (c_shape t)) ax with
    | Some k =>
        Some (CTy (c_dtype t) (if keep then set_at k 1 (c_shape t) else remove_at k (c_shape t))
                  (c_device t))
    | None => None
    end
  else None.

Definition s_reduce (op : string) (keep : bool) (ax : axis) (t : ty) : option ty :=
  if reduce_dtype_ok op (ty_dtype t) then
    match s_axis (ty_shape t) ax with
    | Some k =>
        let s := ty_shape t in
        Some (Ty (ty_dtype t)
                 (Shape (group s) (if keep then set_at k (DLit 1) (fixed s)
                                   else remove_at k (fixed s)))
                 (ty_device t))
    | None => None
    end
  else None.

(** ** [matmul] (kinac's matmul rule): [[..., M, K] x [..., K', N] -> [..., M, N]] with
    [K ≡ K'] and broadcasting batch dims; and [[..b K] x [K' N] -> [..b N]] (the group holds the
    rows). Operands are tensors (not literals) of one dtype, not bool. *)
Definition mm_dtype (a b : dtype) : option dtype :=
  if is_weak a || is_weak b then None
  else if dtype_eqb a b && negb (dtype_eqb a (DT Bool)) then Some a else None.

Definition c_mm_general (a b : list nat) : option (list nat) :=
  match rev a, rev b with
  | k :: m :: ra, n :: k' :: rb =>
      if Nat.eqb k k' then
        match c_broadcast (rev ra) (rev rb) with Some c => Some (c ++ [m; n]) | None => None end
      else None
  | _, _ => None
  end.

Definition c_mm_shape (a b : list nat) : option (list nat) :=
  if Nat.eqb (List.length a) 1 && Nat.eqb (List.length b) 2 then
    match a, b with
    | [k], [k'; n] => if Nat.eqb k k' then Some [n] else None
    | _, _ => None
    end
  else c_mm_general a b.

Definition c_matmul (a b : cty) : option cty :=
  match mm_dtype (c_dtype a) (c_dtype b), join_dev (c_device a) (c_device b),
        c_mm_shape (c_shape a) (c_shape b) with
  | Some d, Some dev, Some s => Some (CTy d s dev)
  | _, _, _ => None
  end.

Inductive mm_shape (A : list constr) : shape -> shape -> shape -> Prop :=
| MM_batch : forall (ga gb g : option string) (ba bb bc : list dim) (m k k' n : dim),
    provably_eq A k k' -> shape_bcast A (Shape ga ba) (Shape gb bb) (Shape g bc) ->
    mm_shape A (Shape ga (ba ++ [m; k])) (Shape gb (bb ++ [k'; n])) (Shape g (bc ++ [m; n]))
| MM_rows : forall (g : string) (k k' n : dim),
    provably_eq A k k' ->
    mm_shape A (Shape (Some g) [k]) (Shape None [k'; n]) (Shape (Some g) [n]).

(** Executable instance (syntactic dim equality), for the agreement test. *)
Definition s_mm_general (a b : shape) : option shape :=
  match rev (fixed a), rev (fixed b) with
  | k :: m :: ra, n :: k' :: rb =>
      if dim_eqb k k' then
        match s_broadcast (Shape (group a) (rev ra)) (Shape (group b) (rev rb)) with
        | Some (Shape g bc) => Some (Shape g (bc ++ [m; n]))
        | None => None
        end
      else None
  | _, _ => None
  end.

Definition s_mm_shape (a b : shape) : option shape :=
  match group a, fixed a, group b, fixed b with
  | Some g, [k], None, [k'; n] => if dim_eqb k k' then Some (Shape (Some g) [n]) else None
  | _, _, _, _ => s_mm_general a b
  end.

Lemma s_mm_general_sound : forall A a b c, s_mm_general a b = Some c -> mm_shape A a b c.
Proof.
  intros A [ga fa] [gb fb] c H; unfold s_mm_general in H; simpl in H.
  destruct (rev fa) as [|k [|m ra]] eqn:Ea; try discriminate.
  destruct (rev fb) as [|n [|k' rb]] eqn:Eb; try discriminate.
  destruct (dim_eqb k k') eqn:Ek; [|discriminate].
  destruct (s_broadcast (Shape ga (rev ra)) (Shape gb (rev rb))) as [[g bc]|] eqn:Es;
    [|discriminate].
  injection H as <-.
  apply dim_eqb_eq in Ek; subst k'.
  rewrite <- (rev_involutive fa), <- (rev_involutive fb), Ea, Eb; simpl.
  rewrite <- !app_assoc; simpl.
  apply MM_batch; [apply provably_eq_refl | apply s_broadcast_sound; exact Es].
Qed.

Arguments s_mm_general : simpl never.

Lemma s_mm_shape_sound : forall A a b c, s_mm_shape a b = Some c -> mm_shape A a b c.
Proof.
  intros A [ga fa] [gb fb] c H; unfold s_mm_shape in H; simpl in H.
  destruct ga as [g|], fa as [|k [|x fa]], gb as [h|], fb as [|k' [|n [|y fb]]];
    try (apply s_mm_general_sound; exact H).
  destruct (dim_eqb k k') eqn:Ek; [|discriminate].
  apply dim_eqb_eq in Ek; subst; injection H as <-; apply MM_rows, provably_eq_refl.
Qed.

Definition s_matmul (a b : ty) : option ty :=
  match mm_dtype (ty_dtype a) (ty_dtype b), join_dev (ty_device a) (ty_device b),
        s_mm_shape (ty_shape a) (ty_shape b) with
  | Some d, Some dev, Some s => Some (Ty d s dev)
  | _, _, _ => None
  end.
